/* The simulator's event loop in C, for a loaded graph's task list on an idle device.
 *
 * ``runtime/sim.py`` is the model; this file is its plain step (``Simulator._step`` with
 * no fast paths, ``CorePools``' methods) over arrays, for the case a graph-mode run of a
 * compiled plan puts it in: every task of the plan enqueued at one host time on streams
 * that were idle, kernels, event records and waits only, no core caps, no driver, no
 * callback but the tape's. Every float is computed by the same operations in the same
 * order as the Python code (build with -ffp-contract=off: no fused multiply-adds), the
 * same seq numbers are drawn, and the core log is the plain step's. Where Python would
 * raise (a division by zero) the run stops with a status and the caller runs the Python
 * simulator instead. ``runtime/sim_core.py`` prepares the arrays and reads the results;
 * ``tests/unit/runtime/test_sim_core.py`` compares the two bit for bit.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BLOCK_US 1e-3
#define DONE_EPS 1e-9

enum { KERNEL = 0, RECORD = 1, WAIT = 2 };
enum { OK = 0, STALLED = 1, ZERO_DIVISION = 2, NO_MEMORY = 3, TOO_MANY_TIMERS = 4 };

typedef struct { int32_t task, pool; int64_t n; double left, time, bytes, demand, rate; } Cohort;
typedef struct { double t; int64_t seq; int32_t stream; } Timer;
typedef struct { double t; int64_t seq; int32_t task; } Ready;

typedef struct {
    /* the task list, in launch order */
    int32_t nstreams, npools;
    const uint8_t *kind;
    const int32_t *stream, *pool, *wait_rec, *kidx, *rank;
    const int64_t *nblocks, *prio;
    const double *block_us, *block_bytes;
    double bw, overhead, enqueue;
    /* per task */
    int64_t *seq, *left, *running, *maxc;
    double *start, *ready_t, *end;
    uint8_t *done;
    /* per stream: its tasks in order (stasks[qhead..qend)), the one running, ... */
    int32_t *stasks, *qhead, *qend, *sactive, *blocked_on;
    int64_t *pending;
    double *last_end;
    uint8_t *is_dirty;
    int32_t *dirty, ndirty, *batch;
    /* the device */
    double now;
    int64_t nseq, queued;
    Timer *timers;
    Py_ssize_t ntimers, cap_timers;
    Ready *readyq;
    Py_ssize_t rhead, rtail;
    int32_t *active;
    Py_ssize_t nactive;
    Cohort *cohorts, *tmp;
    Cohort **users;
    Py_ssize_t ncoh;
    int64_t *free;
    double ct, next_t;
    int stale, err;
    /* what the run leaves */
    int32_t *fin, *steps;
    Py_ssize_t nfin, nsteps;
    double *lt;
    int32_t *lp;
    int64_t *ld;
    Py_ssize_t nlog, caplog;
} Sim;

static double quot(Sim *s, double a, double b) {   /* a / b, or a ZeroDivisionError in Python */
    if (b == 0.0) {
        s->err = ZERO_DIVISION;
        return 0.0;
    }
    return a / b;
}

static void log_cores(Sim *s, double t, int32_t pool, int64_t d) {
    /* A change at the time and pool of the one before it is added to that one (a wave's
     * cores given back and taken again cancel out): samples see only the busy count each
     * time ends with (``samples.py``), and the Python loop's waves leave these out too. */
    if (s->nlog && s->lt[s->nlog - 1] == t && s->lp[s->nlog - 1] == pool) {
        if ((s->ld[s->nlog - 1] += d) == 0) s->nlog--;
        return;
    }
    if (s->nlog == s->caplog) {
        Py_ssize_t cap = s->caplog ? 2 * s->caplog : 256;
        double *lt = realloc(s->lt, cap * sizeof(double));
        if (lt) s->lt = lt;
        int32_t *lp = realloc(s->lp, cap * sizeof(int32_t));
        if (lp) s->lp = lp;
        int64_t *ld = realloc(s->ld, cap * sizeof(int64_t));
        if (ld) s->ld = ld;
        if (!lt || !lp || !ld) {
            s->err = NO_MEMORY;
            return;
        }
        s->caplog = cap;
    }
    s->lt[s->nlog] = t;
    s->lp[s->nlog] = pool;
    s->ld[s->nlog] = d;
    s->nlog++;
}

static void mark_dirty(Sim *s, int32_t st) {   /* ``_dirty.add`` */
    if (!s->is_dirty[st]) {
        s->is_dirty[st] = 1;
        s->dirty[s->ndirty++] = st;
    }
}

/* ---- timers: a binary heap by (t, seq), as heapq's tuples ---------------------------- */
static int timer_lt(const Timer *a, const Timer *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void push_timer(Sim *s, double t, int32_t st) {
    if (s->ntimers == s->cap_timers) {   /* more than the run can need: stop, the Python loop runs it */
        s->err = TOO_MANY_TIMERS;
        return;
    }
    Py_ssize_t i = s->ntimers++;
    Timer x = {t, s->nseq++, st};
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!timer_lt(&x, &s->timers[p])) break;
        s->timers[i] = s->timers[p];
        i = p;
    }
    s->timers[i] = x;
}

static Timer pop_timer(Sim *s) {
    Timer top = s->timers[0];
    Timer x = s->timers[--s->ntimers];
    Py_ssize_t n = s->ntimers, i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && timer_lt(&s->timers[c + 1], &s->timers[c])) c++;
        if (!timer_lt(&s->timers[c], &x)) break;
        s->timers[i] = s->timers[c];
        i = c;
    }
    if (n > 0) s->timers[i] = x;
    return top;
}

/* ---- the core pools (``CorePools``) ----------------------------------------------------- */
static void advance(Sim *s, double now) {
    double dt = now - s->ct;
    if (dt > 0) {
        for (Py_ssize_t i = 0; i < s->ncoh; i++) s->cohorts[i].left -= s->cohorts[i].rate * dt;
        s->ct = now;
    }
}

static void init_cohort(Cohort *c, int32_t task, int32_t pool, int64_t n, double time, double nbytes) {
    c->task = task;
    c->pool = pool;
    c->n = n;
    c->left = 1.0;
    c->time = MIN_BLOCK_US > time ? MIN_BLOCK_US : time;
    c->bytes = nbytes;
    c->demand = nbytes / c->time;
    c->rate = 1.0 / c->time;
}

static double solo_rate(Sim *s, const Cohort *c) {
    if (c->bytes > 0) {
        double r = 1.0 / c->time, share = quot(s, s->bw, (double)c->n * c->bytes);
        return share < r ? share : r;
    }
    return 1.0 / c->time;
}

static void finish(Sim *s, int32_t task);

static void pop_done(Sim *s, double now) {   /* ``pop_done``, then ``_blocks_done`` of each */
    advance(s, now);
    Py_ssize_t ndone = 0, nkeep = 0;
    for (Py_ssize_t i = 0; i < s->ncoh; i++) {
        Cohort c = s->cohorts[i];
        if (c.left <= DONE_EPS || now + quot(s, c.left, c.rate) <= now)
            s->tmp[ndone++] = c;
        else
            s->cohorts[nkeep++] = c;
    }
    if (!ndone) return;
    s->ncoh = nkeep;
    for (Py_ssize_t i = 0; i < ndone; i++) {
        s->free[s->tmp[i].pool] += s->tmp[i].n;
        log_cores(s, now, s->tmp[i].pool, -s->tmp[i].n);
    }
    s->stale = 1;
    for (Py_ssize_t i = 0; i < ndone; i++) {
        int32_t task = s->tmp[i].task;
        s->running[task] -= s->tmp[i].n;
        if (s->left[task] == 0 && s->running[task] == 0) finish(s, task);
    }
}

static void retime(Sim *s) {   /* ``CorePools.retime``: water-filling, then the next finish */
    s->stale = 0;
    if (s->ncoh == 1) {
        Cohort *c = &s->cohorts[0];
        c->rate = solo_rate(s, c);
        s->next_t = s->ct + quot(s, c->left, c->rate);
        return;
    }
    if (s->ncoh == 0) {
        s->next_t = s->ct + INFINITY;
        return;
    }
    Py_ssize_t nu = 0;
    int64_t n = 0;
    for (Py_ssize_t i = 0; i < s->ncoh; i++) {
        Cohort *c = &s->cohorts[i];
        if (c->bytes > 0) {
            /* insertion by demand after every equal one: the stable sort list.sort does */
            Py_ssize_t j = nu++;
            while (j > 0 && c->demand < s->users[j - 1]->demand) {
                s->users[j] = s->users[j - 1];
                j--;
            }
            s->users[j] = c;
            n += c->n;
        }
    }
    double bw = s->bw;
    for (Py_ssize_t i = 0; i < nu; i++) {
        Cohort *c = s->users[i];
        double share = bw / (double)n;
        double alloc = share < c->demand ? share : c->demand;
        c->rate = alloc / c->bytes;
        bw -= alloc * (double)c->n;
        n -= c->n;
    }
    double m = INFINITY;
    for (Py_ssize_t i = 0; i < s->ncoh; i++) {
        double x = quot(s, s->cohorts[i].left, s->cohorts[i].rate);
        if (x < m) m = x;
    }
    s->next_t = s->ct + m;
}

static void place(Sim *s, int32_t task, int32_t pool, int64_t n, double now) {
    s->free[pool] -= n;
    log_cores(s, now, pool, n);
    init_cohort(&s->cohorts[s->ncoh++], task, pool, n, s->block_us[task], s->block_bytes[task]);
    s->left[task] -= n;
    s->running[task] += n;
    if (s->running[task] > s->maxc[task]) s->maxc[task] = s->running[task];
}

static void fill(Sim *s, double now) {   /* ``CorePools.fill`` of the waiting kernels */
    Py_ssize_t placed = 0;
    for (Py_ssize_t i = 0; i < s->nactive; i++) {
        int32_t task = s->active[i], pool = s->pool[task];
        int64_t n = s->free[pool];
        if (n <= 0) continue;
        if (s->left[task] < n) n = s->left[task];
        if (now > s->ct) {
            if (s->ncoh) advance(s, now);
            else s->ct = now;
        }
        place(s, task, pool, n, now);
        s->stale = 1;
        if (s->left[task] == 0) placed++;
    }
    if (placed) {
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < s->nactive; i++)
            if (s->left[s->active[i]]) s->active[k++] = s->active[i];
        s->nactive = k;
    }
}

static int place_alone(Sim *s, int32_t task, double now) {   /* ``CorePools.place_alone`` */
    int32_t pool = s->pool[task];
    int64_t n = s->free[pool];
    if (s->left[task] < n) n = s->left[task];
    if (n <= 0) return 1;
    if (now > s->ct) s->ct = now;
    place(s, task, pool, n, now);
    Cohort *c = &s->cohorts[s->ncoh - 1];
    s->stale = 0;
    c->rate = solo_rate(s, c);
    s->next_t = s->ct + quot(s, c->left, c->rate);
    return s->left[task] > 0;
}

/* ---- the streams (``Simulator``) --------------------------------------------------------- */
static void finish(Sim *s, int32_t task) {   /* ``_finish``, the tape's end step included */
    int32_t st = s->stream[task];
    s->end[task] = s->now;
    s->done[task] = 1;
    if (s->sactive[st] == task) s->sactive[st] = -1;
    s->last_end[st] = s->now;
    s->pending[st]--;
    s->queued--;
    mark_dirty(s, st);
    s->fin[s->nfin++] = task;
    if (s->kind[task] == KERNEL) s->steps[s->nsteps++] = ~s->kidx[task];
}

static int urgency_lt(Sim *s, int32_t a, int32_t b) {   /* (stream priority, seq) */
    int64_t pa = s->prio[s->stream[a]], pb = s->prio[s->stream[b]];
    return pa < pb || (pa == pb && s->seq[a] < s->seq[b]);
}

static void insort_active(Sim *s, int32_t task) {   /* ``bisect.insort(active, task, key=_urgency)`` */
    Py_ssize_t lo = 0, hi = s->nactive;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (urgency_lt(s, task, s->active[mid])) hi = mid;
        else lo = mid + 1;
    }
    memmove(&s->active[lo + 1], &s->active[lo], (s->nactive - lo) * sizeof(int32_t));
    s->active[lo] = task;
    s->nactive++;
}

static void due(Sim *s, double t) {   /* ``_due``: timers and ready kernels by (time, seq) */
    for (;;) {
        if (s->rhead < s->rtail && s->readyq[s->rhead].t <= t) {
            Ready *r = &s->readyq[s->rhead];
            Timer *h = s->ntimers ? &s->timers[0] : NULL;
            if (!(h && (h->t < r->t || (h->t == r->t && h->seq < r->seq)))) {
                s->rhead++;
                insort_active(s, r->task);
                continue;
            }
        }
        if (s->ntimers && s->timers[0].t <= t) {
            Timer x = pop_timer(s);
            mark_dirty(s, x.stream);
            continue;
        }
        return;
    }
}

static void run_stream(Sim *s, int32_t st) {   /* ``_run_stream`` with ``_start`` of each kind */
    while (s->sactive[st] < 0 && s->qhead[st] < s->qend[st]) {
        int32_t task = s->stasks[s->qhead[st]];
        if (s->enqueue > s->now) {
            push_timer(s, s->enqueue, st);
            return;
        }
        uint8_t kind = s->kind[task];
        if (kind == KERNEL) {   /* its start, then ``_queue_blocks`` */
            s->start[task] = s->now;
            s->steps[s->nsteps++] = s->kidx[task];
            s->left[task] = s->nblocks[task];
            s->ready_t[task] = s->now + s->overhead;
            s->sactive[st] = task;
            Ready r = {s->ready_t[task], s->nseq++, task};
            s->readyq[s->rtail++] = r;
            s->qhead[st]++;
            return;
        }
        if (kind == WAIT) {
            int32_t rec = s->wait_rec[task];
            if (!(s->done[rec] && s->end[rec] <= s->now)) {   /* its record has not run: blocked */
                s->blocked_on[st] = rec;
                return;
            }
        }
        s->start[task] = s->now;
        finish(s, task);
        if (kind == RECORD) {   /* ``_wake_here``: the streams blocked on it look again */
            for (int32_t o = 0; o < s->nstreams; o++)
                if (s->blocked_on[o] == task) {
                    s->blocked_on[o] = -1;
                    mark_dirty(s, o);
                }
        }
        s->qhead[st]++;
    }
}

static void settle(Sim *s) {   /* ``_settle`` */
    while (s->ndirty) {
        if (s->ndirty == 1) {
            int32_t st = s->dirty[0];
            s->ndirty = 0;
            s->is_dirty[st] = 0;
            run_stream(s, st);
            continue;
        }
        int32_t n = s->ndirty;   /* ``sorted(dirty, key=_by_priority)`` */
        for (int32_t i = 0; i < n; i++) {
            int32_t st = s->dirty[i], j = i;
            while (j > 0 && s->rank[st] < s->rank[s->batch[j - 1]]) {
                s->batch[j] = s->batch[j - 1];
                j--;
            }
            s->batch[j] = st;
            s->is_dirty[st] = 0;
        }
        s->ndirty = 0;
        for (int32_t i = 0; i < n; i++) run_stream(s, s->batch[i]);
    }
    if (s->nactive) fill(s, s->now);
    if (s->stale) retime(s);
}

static int step(Sim *s) {   /* ``_step`` with no limit; 0: nothing is due (stalled) */
    double t_timer = s->ntimers ? s->timers[0].t : INFINITY;
    int have_ready = s->rhead < s->rtail;
    if (have_ready && s->readyq[s->rhead].t < t_timer) t_timer = s->readyq[s->rhead].t;
    double t = s->next_t;
    if (t < t_timer) {   /* blocks end, no timer is due */
        if (t > s->now) s->now = t;
        pop_done(s, t);
        if ((s->ntimers && s->timers[0].t <= t) || (s->rhead < s->rtail && s->readyq[s->rhead].t <= t))
            due(s, t);
    } else {
        t = t_timer;
        if (t == INFINITY) return 0;
        if (t > s->now) s->now = t;
        if (!s->ncoh) {
            if (!s->nactive && have_ready && s->readyq[s->rhead].t <= t && !(s->ntimers && s->timers[0].t <= t)
                && (s->rtail - s->rhead == 1 || s->readyq[s->rhead + 1].t > t) && !s->ndirty) {
                int32_t task = s->readyq[s->rhead++].task;   /* a kernel's blocks, on an idle device */
                if (place_alone(s, task, t)) s->active[s->nactive++] = task;
                return 1;
            }
        } else if (s->next_t <= t) {
            pop_done(s, t);
        }
        due(s, t);
    }
    settle(s);
    return 1;
}

/* ---- the Python entry --------------------------------------------------------------------- */
static PyObject *list_of_doubles(const double *v, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyFloat_FromDouble(v[i]);
        if (!x) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

static PyObject *list_of_ints(const int64_t *v64, const int32_t *v32, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v64 ? v64[i] : (long long)v32[i]);
        if (!x) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

static PyObject *core_log(Sim *s, PyObject *names) {   /* [(t, pool name, +/- cores)] */
    PyObject *out = PyList_New(s->nlog);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < s->nlog; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, s->lp[i]);
        Py_INCREF(name);
        PyObject *x = Py_BuildValue("(dNL)", s->lt[i], name, (long long)s->ld[i]);
        if (!x) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject_GC_UnTrack(x);   /* a float, a str and an int: no cycle (the collector would untrack it) */
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

static int need(Py_buffer *b, Py_ssize_t n, Py_ssize_t size, const char *what) {
    if (b->len != n * size) {
        PyErr_Format(PyExc_ValueError, "_simcore.run: %s holds %zd bytes, expected %zd", what, b->len, n * size);
        return 0;
    }
    return 1;
}

static void *take(Py_ssize_t n, Py_ssize_t size, int *ok) {
    void *p = calloc(n > 0 ? (size_t)n : 1, (size_t)size);
    if (!p) *ok = 0;
    return p;
}

static PyObject *run(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer kind, stream, pool, nblocks, bu, bb, wrec, kidx, prio, rank, freeb;
    PyObject *names;
    double bw, overhead, enqueue, now, ct;
    long long seq0;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*O!dddddL", &kind, &stream, &pool, &nblocks, &bu, &bb,
                          &wrec, &kidx, &prio, &rank, &freeb, &PyTuple_Type, &names, &bw, &overhead, &enqueue,
                          &now, &ct, &seq0))
        return NULL;
    Py_buffer *bufs[] = {&kind, &stream, &pool, &nblocks, &bu, &bb, &wrec, &kidx, &prio, &rank, &freeb};
    PyObject *result = NULL;
    Sim s;
    memset(&s, 0, sizeof s);
    Py_ssize_t n = kind.len;
    s.nstreams = (int32_t)(prio.len / 8);
    s.npools = (int32_t)(freeb.len / 8);
    if (!(need(&stream, n, 4, "stream") && need(&pool, n, 4, "pool") && need(&nblocks, n, 8, "nblocks")
          && need(&bu, n, 8, "block_us") && need(&bb, n, 8, "block_bytes") && need(&wrec, n, 4, "wait_rec")
          && need(&kidx, n, 4, "kidx") && need(&rank, s.nstreams, 4, "rank")
          && need(&freeb, PyTuple_GET_SIZE(names), 8, "free")))
        goto done;
    s.kind = kind.buf;
    s.stream = stream.buf;
    s.pool = pool.buf;
    s.nblocks = nblocks.buf;
    s.block_us = bu.buf;
    s.block_bytes = bb.buf;
    s.wait_rec = wrec.buf;
    s.kidx = kidx.buf;
    s.prio = prio.buf;
    s.rank = rank.buf;
    s.bw = bw;
    s.overhead = overhead;
    s.enqueue = enqueue;
    s.now = now;
    s.ct = ct;
    s.next_t = INFINITY;
    for (Py_ssize_t i = 0; i < n; i++)
        if (s.stream[i] < 0 || s.stream[i] >= s.nstreams
            || (s.kind[i] == KERNEL && (s.pool[i] < 0 || s.pool[i] >= s.npools || s.nblocks[i] < 1))
            || (s.kind[i] == WAIT && (s.wait_rec[i] < 0 || s.wait_rec[i] >= n || s.kind[s.wait_rec[i]] != RECORD))
            || s.kind[i] > WAIT) {
            PyErr_Format(PyExc_ValueError, "_simcore.run: task %zd names a stream, pool or record out of range, or has no block", i);
            goto done;
        }
    int ok = 1;
    int32_t ns = s.nstreams;
    s.seq = take(n, 8, &ok); s.left = take(n, 8, &ok); s.running = take(n, 8, &ok); s.maxc = take(n, 8, &ok);
    s.start = take(n, 8, &ok); s.ready_t = take(n, 8, &ok); s.end = take(n, 8, &ok); s.done = take(n, 1, &ok);
    s.stasks = take(n, 4, &ok); s.qhead = take(ns, 4, &ok); s.qend = take(ns, 4, &ok);
    s.sactive = take(ns, 4, &ok); s.blocked_on = take(ns, 4, &ok); s.pending = take(ns, 8, &ok);
    s.last_end = take(ns, 8, &ok); s.is_dirty = take(ns, 1, &ok); s.dirty = take(ns, 4, &ok); s.batch = take(ns, 4, &ok);
    s.cap_timers = n + ns + 1;
    s.timers = take(s.cap_timers, sizeof(Timer), &ok); s.readyq = take(n, sizeof(Ready), &ok);
    Py_ssize_t cores = 1;   /* cohorts alive at once: each holds a core at least */
    for (int32_t p = 0; p < s.npools; p++) cores += ((const int64_t *)freeb.buf)[p] > 0 ? ((const int64_t *)freeb.buf)[p] : 0;
    s.active = take(n + 1, 4, &ok); s.cohorts = take(cores, sizeof(Cohort), &ok); s.tmp = take(cores, sizeof(Cohort), &ok);
    s.users = take(cores, sizeof(Cohort *), &ok); s.free = take(s.npools, 8, &ok);
    s.fin = take(n, 4, &ok); s.steps = take(2 * n, 4, &ok);
    if (!ok) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(s.free, freeb.buf, s.npools * 8);
    for (Py_ssize_t i = 0; i < n; i++) s.qend[s.stream[i]]++;   /* each stream's tasks, in launch order */
    for (int32_t st = 0, at = 0; st < ns; st++) {
        int32_t k = s.qend[st];
        s.qhead[st] = s.qend[st] = at;
        at += k;
        s.sactive[st] = s.blocked_on[st] = -1;
    }
    s.nseq = seq0;   /* ``submit``: a seq per task, and a timer for a stream whose queue was empty */
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t st = s.stream[i];
        s.seq[i] = s.nseq++;
        s.stasks[s.qend[st]++] = (int32_t)i;
        s.pending[st]++;
        s.queued++;
        if (s.qend[st] - s.qhead[st] == 1) push_timer(&s, enqueue, st);
    }
    int status = OK;
    for (uint32_t k = 1; s.queued > 0 && !s.err; k++) {
        if (!step(&s)) status = STALLED;
        if (status != OK) break;
        if (!(k & 0xFFFF) && PyErr_CheckSignals() < 0) goto done;   /* Ctrl-C: nothing was changed yet */
    }
    if (s.err) status = s.err;
    if (status == NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (status != OK) {   /* the caller runs the Python loop: nothing of this run is wanted */
        result = Py_BuildValue("(i)", status);
        goto done;
    }
    PyObject *parts[9] = {list_of_ints(s.seq, NULL, n), list_of_doubles(s.start, n), list_of_doubles(s.ready_t, n),
                          list_of_doubles(s.end, n), list_of_ints(s.maxc, NULL, n), list_of_ints(NULL, s.fin, s.nfin),
                          list_of_ints(NULL, s.steps, s.nsteps), core_log(&s, names), list_of_doubles(s.last_end, ns)};
    int made = 1;
    for (int i = 0; i < 9; i++) made = made && parts[i] != NULL;
    if (made)
        result = Py_BuildValue("(iNNNNNNNNNddL)", status, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5],
                               parts[6], parts[7], parts[8], s.now, s.ct, (long long)s.nseq);
    else
        for (int i = 0; i < 9; i++) Py_XDECREF(parts[i]);
done:
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) PyBuffer_Release(bufs[i]);
    void *owned[] = {s.seq, s.left, s.running, s.maxc, s.start, s.ready_t, s.end, s.done, s.stasks, s.qhead,
                     s.qend, s.sactive, s.blocked_on, s.pending, s.last_end, s.is_dirty, s.dirty, s.batch,
                     s.timers, s.readyq, s.active, s.cohorts, s.tmp, s.users, s.free, s.fin, s.steps,
                     s.lt, s.lp, s.ld};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
    return result;
}

/* ---- objects from columns ---------------------------------------------------------------- */
static PyObject *column_item(PyObject *col, int is_column, Py_ssize_t i) {   /* borrowed */
    return is_column ? PyList_GET_ITEM(col, i) : col;
}

/* Which columns are lists of ``n`` (flags[j] true) rather than one value for all, read once
 * (PyMem_Free it); NULL with an error set where a flag or a list is wrong. */
static int *column_flags(PyObject *columns, PyObject *flags, Py_ssize_t n) {
    Py_ssize_t k = PyTuple_GET_SIZE(columns);
    if (PyTuple_GET_SIZE(flags) != k) {
        PyErr_SetString(PyExc_ValueError, "_simcore: one flag per column");
        return NULL;
    }
    int *is_col = PyMem_Malloc((k ? k : 1) * sizeof(int));
    if (!is_col) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *col = PyTuple_GET_ITEM(columns, j);
        is_col[j] = PyObject_IsTrue(PyTuple_GET_ITEM(flags, j));
        if (is_col[j] < 0 || (is_col[j] && (!PyList_Check(col) || PyList_GET_SIZE(col) != n))) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "_simcore: column %zd is not a list of %zd", j, n);
            PyMem_Free(is_col);
            return NULL;
        }
    }
    return is_col;
}

/* instances(cls, members, columns, flags, n): n new ``cls`` objects (a class with
 * ``__slots__``, no ``__init__`` run), member j of object i set to columns[j][i] (a list)
 * or to columns[j] (flags[j] false: the same object for all). What the dataclass's
 * ``__init__`` does with the same values, with no Python frame per object. */
static PyObject *instances(PyObject *self, PyObject *args) {
    (void)self;
    PyTypeObject *cls;
    PyObject *members, *columns, *flags;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!O!O!O!n", &PyType_Type, &cls, &PyTuple_Type, &members, &PyTuple_Type, &columns,
                          &PyTuple_Type, &flags, &n))
        return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(members);
    if (PyTuple_GET_SIZE(columns) != k) {
        PyErr_SetString(PyExc_ValueError, "_simcore.instances: one column per member");
        return NULL;
    }
    int *is_col = column_flags(columns, flags, n);
    if (!is_col) return NULL;
    Py_ssize_t *offsets = PyMem_Malloc((k ? k : 1) * sizeof(Py_ssize_t));
    PyObject *out = NULL;
    if (!offsets) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *d = PyTuple_GET_ITEM(members, j);
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_common.d_type != cls
            || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "_simcore.instances: member %zd is not a slot of %s", j, cls->tp_name);
            goto done;
        }
        offsets[j] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    out = PyList_New(n);
    if (!out) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = cls->tp_alloc(cls, 0);   /* zeroed: every slot unset */
        if (!o) {
            Py_CLEAR(out);
            goto done;
        }
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *v = column_item(PyTuple_GET_ITEM(columns, j), is_col[j], i);
            Py_INCREF(v);
            *(PyObject **)((char *)o + offsets[j]) = v;
        }
        PyList_SET_ITEM(out, i, o);
    }
done:
    PyMem_Free(offsets);
    PyMem_Free(is_col);
    return out;
}

/* tuples(cls, columns, flags, n): n new ``cls`` tuples (a tuple subclass such as a
 * NamedTuple), item j of tuple i from its column, as ``tuple.__new__(cls, ...)`` makes them. */
static PyObject *tuples(PyObject *self, PyObject *args) {
    (void)self;
    PyTypeObject *cls;
    PyObject *columns, *flags;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!O!O!n", &PyType_Type, &cls, &PyTuple_Type, &columns, &PyTuple_Type, &flags, &n))
        return NULL;
    if (!PyType_IsSubtype(cls, &PyTuple_Type)) {
        PyErr_Format(PyExc_TypeError, "_simcore.tuples: %s is not a tuple type", cls->tp_name);
        return NULL;
    }
    int *is_col = column_flags(columns, flags, n);
    if (!is_col) return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(columns);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *o = cls->tp_alloc(cls, k);
        if (!o) {
            Py_CLEAR(out);
            break;
        }
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *v = column_item(PyTuple_GET_ITEM(columns, j), is_col[j], i);
            Py_INCREF(v);
            PyTuple_SET_ITEM(o, j, v);
        }
        PyList_SET_ITEM(out, i, o);
    }
    PyMem_Free(is_col);
    return out;
}

static PyMethodDef methods[] = {
    {"instances", instances, METH_VARARGS, "instances(cls, members, columns, flags, n) -> list of n cls objects."},
    {"tuples", tuples, METH_VARARGS, "tuples(cls, columns, flags, n) -> list of n cls tuples."},
    {"run", run, METH_VARARGS,
     "run(kind, stream, pool, nblocks, block_us, block_bytes, wait_rec, kidx, prio, rank, free, pool_names, "
     "bw, overhead, enqueue, now, cores_t, seq0) -> (status, seq, start, ready, end, max_cores, finished, "
     "steps, core_log, last_end, now, cores_t, next_seq): a graph's task list run to the end; (status,) "
     "alone where it stopped (stalled, a division by zero)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_simcore",
                                    "The simulator's event loop in C (see runtime/sim_core.py).", -1, methods};

/* Bumped with every change of what the functions take or return (``sim_core.ABI``): a
 * module built from an older source is then left unused rather than called wrongly. */
#define ABI 2

PyMODINIT_FUNC PyInit__simcore(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", ABI) < 0) Py_CLEAR(m);
    return m;
}
