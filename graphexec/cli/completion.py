"""``graphexec completion bash|zsh``: a shell completion script made from the parser itself,
so it knows every command, option and choice there is: ``eval "$(graphexec completion bash)"``
in ~/.bashrc, the same with ``zsh`` in ~/.zshrc (zsh runs the bash function through
``bashcompinit``)."""

from __future__ import annotations

import argparse
from typing import Any

SHELLS = ("bash", "zsh")


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def bash(parser: argparse.ArgumentParser) -> str:
    """The bash function: commands first, then each command's options, an option's choices
    after it, file names elsewhere."""
    commands = _commands(parser)
    lines = ["# graphexec completion for bash: eval \"$(graphexec completion bash)\"",
             "_graphexec() {",
             '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
             '    local cmd="${COMP_WORDS[1]}" opts=""',
             '    if [ "$COMP_CWORD" -eq 1 ]; then',
             f'        COMPREPLY=( $(compgen -W "{" ".join(commands)} --help --version" -- "$cur") ); return 0',
             "    fi",
             '    case "$cmd:$prev" in']
    for name, sub in commands.items():
        for action in sub._actions:
            if action.choices and action.option_strings:
                words = " ".join(map(str, action.choices))
                for flag in action.option_strings:
                    lines.append(f'        {name}:{flag}) COMPREPLY=( $(compgen -W "{words}" -- "$cur") ); return 0;;')
    lines += ["    esac", '    case "$cmd" in']
    for name, sub in commands.items():
        flags = [f for a in sub._actions for f in a.option_strings]
        lines.append(f'        {name}) opts="{" ".join(flags)}";;')
    lines += ["    esac",
              '    if [[ "$cur" == -* ]]; then COMPREPLY=( $(compgen -W "$opts" -- "$cur") )',
              '    else COMPREPLY=( $(compgen -f -- "$cur") ); fi',
              "}",
              "complete -o filenames -F _graphexec graphexec"]
    return "\n".join(lines)


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    if shell == "zsh":
        return "# graphexec completion for zsh: eval \"$(graphexec completion zsh)\"\n" \
               "autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n" + bash(parser)
    return bash(parser)


def cmd_completion(args: argparse.Namespace) -> int:
    from graphexec.cli.app import parser

    print(script(args.shell, parser()))
    return 0


def register(sub: Any) -> None:
    """Add ``completion`` to the CLI's subparsers."""
    p = sub.add_parser("completion", help="print a shell completion script (bash or zsh)")
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(fn=cmd_completion)
