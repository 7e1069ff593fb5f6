/* Depthwise 2-D convolution in float32 (one filter per channel), the hot loop of ShuffleNet,
 * MobileNet and PP-LCNet: numpy has no form of it at memory speed (a batched 1 x k·k
 * matmul over copied columns runs at ~1/6 of it). ``kernels/conv2d.py`` calls it when the
 * module is built, else keeps its numpy path; ``GRAPHEXEC_PLAIN`` keeps the numpy path too.
 *
 * One output row at a time stays in L1: it starts at +0 and takes each tap's product in
 * tap order (row-major over the kernel), over the columns where the tap reads the image;
 * a tap that reads only padding adds nothing (the caller sends filters with a non-finite
 * weight to numpy, where 0·inf is NaN). Build with -ffp-contract=off: every multiply and
 * add is rounded on its own, so the result does not depend on the CPU.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

typedef struct { Py_ssize_t c, h, w, ho, wo, kh, kw, sh, sw, dh, dw, pt, pl; } Geo;

/* x*s + off in [0, n) for x in [lo, hi): the columns (or rows) a tap reads inside the image */
static void span(Py_ssize_t off, Py_ssize_t s, Py_ssize_t n, Py_ssize_t count, Py_ssize_t *lo, Py_ssize_t *hi) {
    Py_ssize_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    Py_ssize_t b = n - 1 - off < 0 ? 0 : (n - 1 - off) / s + 1;
    *lo = a;
    *hi = b < count ? b : count;
}

CLONES
static void row_unit(float *restrict o, const float *restrict r, float wv, Py_ssize_t a, Py_ssize_t b) {
    for (Py_ssize_t x = a; x < b; x++) o[x] += wv * r[x];
}

CLONES
static void row_strided(float *restrict o, const float *restrict r, float wv, Py_ssize_t a, Py_ssize_t b,
                        Py_ssize_t s) {
    for (Py_ssize_t x = a; x < b; x++) o[x] += wv * r[x * s];
}

/* The generic loop: any kernel, stride and dilation, bounds checked per tap and row. */
static void conv_generic(const Geo *g, const float *x, const float *w, float *out) {
    Py_ssize_t taps = g->kh * g->kw;
    for (Py_ssize_t c = 0; c < g->c; c++) {
        const float *img = x + c * g->h * g->w, *wc = w + c * taps;
        for (Py_ssize_t oy = 0; oy < g->ho; oy++) {
            float *o = out + (c * g->ho + oy) * g->wo;
            memset(o, 0, (size_t)g->wo * sizeof(float));
            for (Py_ssize_t i = 0; i < g->kh; i++) {
                Py_ssize_t iy = oy * g->sh - g->pt + i * g->dh;
                if (iy < 0 || iy >= g->h) continue;
                const float *row = img + iy * g->w;
                for (Py_ssize_t j = 0; j < g->kw; j++) {
                    Py_ssize_t off = j * g->dw - g->pl, a, b;
                    span(off, g->sw, g->w, g->wo, &a, &b);
                    if (a >= b) continue;
                    if (g->sw == 1) row_unit(o, row + off, wc[i * g->kw + j], a, b);
                    else row_strided(o, row + off, wc[i * g->kw + j], a, b, g->sw);
                }
            }
        }
    }
}

/* Image columns 0..n-1 of one row to the two phases of a stride-2 plane (padded column
 * ix + pl goes to phase (ix + pl) % 2 at (ix + pl) / 2), as plain indexed loops that
 * GCC vectorizes. */
CLONES
static void split2(float *restrict d0, float *restrict d1, const float *restrict src, Py_ssize_t n, Py_ssize_t pl) {
    if (pl % 2) {   /* odd pad: even image columns go to phase 1 */
        float *t = d0;
        d0 = d1;
        d1 = t;
    }
    d0 += (pl + 1) / 2 - (pl % 2);   /* where image column 0 lands in its phase */
    d1 += pl / 2 + (pl % 2);
    Py_ssize_t half = n / 2;
    for (Py_ssize_t k = 0; k < half; k++) {
        d0[k] = src[2 * k];
        d1[k] = src[2 * k + 1];
    }
    if (n % 2) d0[half] = src[n - 1];
}

/* One channel's padded image, its columns split by phase (column mod S): row r, phase q
 * holds padded columns q, q + S, ...; so tap j of output column x reads phase j % S at
 * x + j / S, and every tap is a contiguous run. Rows past the image are zero. */
static void plane(const Geo *g, const float *img, float *p, Py_ssize_t rows, Py_ssize_t wq, Py_ssize_t s) {
    memset(p, 0, (size_t)(rows * s * wq) * sizeof(float));
    for (Py_ssize_t r = 0; r < rows; r++) {
        Py_ssize_t iy = r - g->pt;
        if (iy < 0 || iy >= g->h) continue;
        const float *src = img + iy * g->w;
        float *dst = p + r * s * wq;
        Py_ssize_t n = g->w < s * wq - g->pl ? g->w : s * wq - g->pl;   /* image columns inside the plane */
        if (s == 1) {
            memcpy(dst + g->pl, src, (size_t)n * sizeof(float));
            continue;
        }
        if (s == 2) {
            split2(dst, dst + wq, src, n, g->pl);
            continue;
        }
        for (Py_ssize_t q = 0; q < s; q++) {   /* padded column col = ix + pl of phase q: col % s == q */
            Py_ssize_t ix = ((q - g->pl) % s + s) % s;
            float *d = dst + q * wq + (ix + g->pl) / s;
            for (; ix < n; ix += s) *d++ = src[ix];
        }
    }
}

/* Output rows of one channel from its plane, kernel K x K, column stride S: each output is
 * the sum of the taps in row-major order, eight columns at a time in a vector (GCC's vector
 * extension: two SSE or one AVX register). The plane is wide enough for the last vector. */
typedef float v8 __attribute__((vector_size(32)));
#define LANES 8

static inline v8 load8(const float *p) {
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

#define DW_ROWS(K, S)                                                                                       \
    CLONES static void rows_##K##_##S(const float *restrict p, const float *restrict wc, float *restrict o, \
                                      Py_ssize_t ho, Py_ssize_t wo, Py_ssize_t wq, Py_ssize_t sh) {         \
        v8 wv[K * K];                                                                                       \
        for (int t = 0; t < K * K; t++)                                                                     \
            for (int l = 0; l < LANES; l++) wv[t][l] = wc[t];                                               \
        for (Py_ssize_t oy = 0; oy < ho; oy++) {                                                            \
            const float *r = p + oy * sh * S * wq;                                                          \
            float *orow = o + oy * wo;                                                                      \
            for (Py_ssize_t x = 0; x < wo; x += LANES) {                                                    \
                v8 acc = {0};                                                                               \
                for (int i = 0; i < K; i++)                                                                 \
                    for (int j = 0; j < K; j++)                                                             \
                        acc += wv[i * K + j] * load8(r + (i * S + j % S) * wq + x + j / S);                 \
                if (x + LANES <= wo) memcpy(orow + x, &acc, sizeof acc);                                    \
                else memcpy(orow + x, &acc, (size_t)(wo - x) * sizeof(float));                              \
            }                                                                                               \
        }                                                                                                   \
    }
DW_ROWS(3, 1)
DW_ROWS(3, 2)
DW_ROWS(5, 1)
DW_ROWS(5, 2)

typedef void (*RowsFn)(const float *, const float *, float *, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t);

static RowsFn rows_for(const Geo *g) {
    if (g->kh != g->kw || g->dh != 1 || g->dw != 1) return NULL;
    if (g->kh == 3) return g->sw == 1 ? rows_3_1 : g->sw == 2 ? rows_3_2 : NULL;
    if (g->kh == 5) return g->sw == 1 ? rows_5_1 : g->sw == 2 ? rows_5_2 : NULL;
    return NULL;
}

/* 0, or -1 when the plane's scratch cannot be had */
static int conv(const Geo *g, const float *x, const float *w, float *out) {
    RowsFn fn = rows_for(g);
    if (fn == NULL) {
        conv_generic(g, x, w, out);
        return 0;
    }
    Py_ssize_t s = g->sw, rows = (g->ho - 1) * g->sh + g->kh;
    Py_ssize_t wq = (g->wo + LANES - 1) / LANES * LANES + (g->kw - 1) / s;   /* the last vector's reach */
    float *p = malloc((size_t)(rows * s * wq) * sizeof(float));
    if (p == NULL) return -1;
    for (Py_ssize_t c = 0; c < g->c; c++) {
        plane(g, x + c * g->h * g->w, p, rows, wq, s);
        fn(p, w + c * g->kh * g->kw, out + c * g->ho * g->wo, g->ho, g->wo, wq, g->sh);
    }
    free(p);
    return 0;
}

static PyObject *depthwise(PyObject *self, PyObject *args) {
    Py_buffer xb, wb, ob;
    Geo g;
    if (!PyArg_ParseTuple(args, "y*y*w*(nnnnnnnnnnnnn)", &xb, &wb, &ob, &g.c, &g.h, &g.w, &g.ho, &g.wo, &g.kh,
                          &g.kw, &g.sh, &g.sw, &g.dh, &g.dw, &g.pt, &g.pl))
        return NULL;
    PyObject *res = NULL;
    if (g.c < 0 || g.h < 1 || g.w < 1 || g.ho < 0 || g.wo < 0 || g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1
        || g.dh < 1 || g.dw < 1
        || xb.len != (Py_ssize_t)sizeof(float) * g.c * g.h * g.w
        || wb.len != (Py_ssize_t)sizeof(float) * g.c * g.kh * g.kw
        || ob.len != (Py_ssize_t)sizeof(float) * g.c * g.ho * g.wo) {
        PyErr_SetString(PyExc_ValueError, "depthwise: buffer sizes do not match the geometry");
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = conv(&g, (const float *)xb.buf, (const float *)wb.buf, (float *)ob.buf);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            PyErr_NoMemory();
        } else {
            res = Py_None;
            Py_INCREF(res);
        }
    }
    PyBuffer_Release(&xb);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&ob);
    return res;
}

static PyMethodDef methods[] = {
    {"depthwise", depthwise, METH_VARARGS,
     "depthwise(x, w, out, (C, H, W, Ho, Wo, kh, kw, sh, sw, dh, dw, pad_top, pad_left)): float32 C-contiguous "
     "buffers x (C, H, W), w (C, kh, kw), out (C, Ho, Wo)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dwconv", "Depthwise float32 convolution.", -1, methods};

PyMODINIT_FUNC PyInit__dwconv(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
