/* QuantizeLinear and DequantizeLinear with one scale and zero point, float32 <-> 8-bit, in
 * one pass: numpy makes 6 passes for the first (divide, rint, add, clip, a NaN check, the
 * cast) and 3 for the second, and a QDQ model (smart_turn: 78 pairs around every MatMul)
 * spends a quarter of its run there. The operations are numpy's, in its order, each rounded
 * as float32 (built with -ffp-contract=off), so the bytes are the same:
 *   quantize:   v = x / s; r = rint(v) + z; NaN and below lo -> lo; above hi -> hi; cast
 *   dequantize: (float(q) - z) * s
 * rint rounds half to even (the default rounding mode, as numpy's). kernels/quant.py calls
 * these when the module is built, and keeps numpy for per-axis parameters, other types and
 * GRAPHEXEC_PLAIN.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

#define QUANT(NAME, T)                                                                                   \
    CLONES static void NAME(const float *restrict x, T *restrict y, Py_ssize_t n, float s, float z,     \
                            float lo, float hi) {                                                      \
        for (Py_ssize_t i = 0; i < n; i++) {                                                           \
            float r = rintf(x[i] / s) + z;                                                             \
            r = r >= lo ? r : lo; /* NaN too */                                                        \
            r = r <= hi ? r : hi;                                                                      \
            y[i] = (T)(int)r;                                                                          \
        }                                                                                              \
    }
QUANT(quant_u8, uint8_t)
QUANT(quant_i8, int8_t)

#define DEQUANT(NAME, T)                                                                               \
    CLONES static void NAME(const T *restrict q, float *restrict y, Py_ssize_t n, float s, float z) { \
        for (Py_ssize_t i = 0; i < n; i++) y[i] = ((float)q[i] - z) * s;                               \
    }
DEQUANT(dequant_u8, uint8_t)
DEQUANT(dequant_i8, int8_t)

static PyObject *quantize(PyObject *self, PyObject *args) {
    Py_buffer xb, yb;
    float s, z;
    int is_signed;
    if (!PyArg_ParseTuple(args, "y*w*ffp", &xb, &yb, &s, &z, &is_signed)) return NULL;
    PyObject *res = NULL;
    if (xb.len != 4 * yb.len) {
        PyErr_SetString(PyExc_ValueError, "quantize: x (float32) and out (8-bit) differ in size");
    } else {
        Py_BEGIN_ALLOW_THREADS
        if (is_signed) quant_i8((const float *)xb.buf, (int8_t *)yb.buf, yb.len, s, z, -128.0f, 127.0f);
        else quant_u8((const float *)xb.buf, (uint8_t *)yb.buf, yb.len, s, z, 0.0f, 255.0f);
        Py_END_ALLOW_THREADS
        res = Py_None;
        Py_INCREF(res);
    }
    PyBuffer_Release(&xb);
    PyBuffer_Release(&yb);
    return res;
}

static PyObject *dequantize(PyObject *self, PyObject *args) {
    Py_buffer qb, yb;
    float s, z;
    int is_signed;
    if (!PyArg_ParseTuple(args, "y*w*ffp", &qb, &yb, &s, &z, &is_signed)) return NULL;
    PyObject *res = NULL;
    if (4 * qb.len != yb.len) {
        PyErr_SetString(PyExc_ValueError, "dequantize: q (8-bit) and out (float32) differ in size");
    } else {
        Py_BEGIN_ALLOW_THREADS
        if (is_signed) dequant_i8((const int8_t *)qb.buf, (float *)yb.buf, qb.len, s, z);
        else dequant_u8((const uint8_t *)qb.buf, (float *)yb.buf, qb.len, s, z);
        Py_END_ALLOW_THREADS
        res = Py_None;
        Py_INCREF(res);
    }
    PyBuffer_Release(&qb);
    PyBuffer_Release(&yb);
    return res;
}

static PyMethodDef methods[] = {
    {"quantize", quantize, METH_VARARGS,
     "quantize(x, out, scale, zero_point, signed): float32 x to (u)int8 out, both C-contiguous."},
    {"dequantize", dequantize, METH_VARARGS,
     "dequantize(q, out, scale, zero_point, signed): (u)int8 q to float32 out, both C-contiguous."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_qlinear", "Per-tensor 8-bit (de)quantization.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__qlinear(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
