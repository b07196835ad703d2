/* The compiled kernels of issue 20: loops the pure-Python core runs per
 * line or per step, done in C with exactly the same result.
 *
 * Optional: ``pip install`` builds it where a C compiler is found and goes
 * on without it where not (setup.py: ``optional=True``); ``parsers.native``
 * imports it, and every caller keeps its Python loop as the fallback
 * (``DFLASH_WATCH_PURE=1`` forces that). Each kernel takes over only the
 * common case and hands anything else back to Python untouched, so the
 * two paths give the same events and alerts: the tests run both
 * (tests/core/test_native.py, tests/shell/test_native_paths.py).
 *
 * Bump ABI with any change of a signature or a meaning: a stale build
 * left in place by an editable install is then ignored, not trusted.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <structmember.h> /* T_OBJECT_EX */

#define ABI 28

/* take_run(view, text, ends, k, pos, flag_cache, run_lines, run_starts,
 *          run_ends, run_lanes, wide, has_cr, fast, shape_max, progress_flag,
 *          glued_at) -> (k, pos)
 *
 * ``LogStream._scan``'s walk over candidate lines while no traceback is
 * open, for the lines it only sets aside: a line whose shape is cached
 * with a lane (or, without one, as plain progress) joins the run lists; a
 * cached shape with no flags is passed over. It stops before the first
 * line it would do anything else with (a shape not cached yet, a line
 * past ``shape_max``, a line that
 * ``glued_at`` (asked of a line with a '\r') cuts, one read on its own:
 * its digits tested on it, a trigger, a line opening with '[') and returns
 * ``k`` and ``pos`` as the Python loop has them before that line, or past
 * the last candidate. ``view`` must be ASCII
 * (the caller checks): its line is its UTF-8, and ``line_shape`` is the
 * line with the digits 1-9 made 0. In a wide chunk (``wide``: ``text``
 * holds characters outside ASCII, each a '?' in ``view`` at the same
 * offset) a line whose view holds a '?' is read from ``text``, as the
 * Python loop reads it: its text, its UTF-8 (surrogatepass) for the
 * shape, and the text handed to ``glued_at``. A tqdm bar drawn with
 * block characters is such a line on every redraw. */
/* ``take_run``'s shapes remembered within one call: the few a run of
 * progress lines alternates between (a step line, a bar). */
#define TR_RECENT 4
#define TR_NORM_MAX 1024

static PyObject *take_run_walk(PyObject *args, PyObject **recent);

static PyObject *
take_run(PyObject *self, PyObject *args)
{
    PyObject *recent[TR_RECENT] = {NULL};
    PyObject *out = take_run_walk(args, recent);
    for (int r = 0; r < TR_RECENT; r++)
        Py_XDECREF(recent[r]);
    return out;
}

static PyObject *
take_run_walk(PyObject *args, PyObject **recent)
{
    int next_recent = 0, fresh = 0;
    char norm[TR_NORM_MAX];
    PyObject *view, *text, *ends, *cache, *lines, *starts, *ends_out, *lanes, *glued;
    Py_ssize_t k, pos, shape_max;
    int wide, has_cr, fast;
    long progress_flag;
    if (!PyArg_ParseTuple(args, "UUO!nnO!O!O!O!O!pppnlO", &view, &text, &PyList_Type, &ends, &k, &pos,
                          &PyDict_Type, &cache, &PyList_Type, &lines, &PyList_Type, &starts,
                          &PyList_Type, &ends_out, &PyList_Type, &lanes, &wide, &has_cr, &fast,
                          &shape_max, &progress_flag, &glued))
        return NULL;
    if (!PyUnicode_IS_ASCII(view)) {
        PyErr_SetString(PyExc_ValueError, "take_run: the view must be ASCII");
        return NULL;
    }
    const char *data = (const char *)PyUnicode_DATA(view);
    Py_ssize_t n = PyUnicode_GET_LENGTH(view);
    if (wide && PyUnicode_GET_LENGTH(text) != n) {
        PyErr_SetString(PyExc_ValueError, "take_run: the text and its view differ in length");
        return NULL;
    }
    Py_ssize_t n_ends = PyList_GET_SIZE(ends);
    while (pos < n) {
        /* while k < n_ends and ends[k] < pos: k += 1 */
        Py_ssize_t end = -1;
        while (k < n_ends) {
            end = PyLong_AsSsize_t(PyList_GET_ITEM(ends, k));
            if (end == -1 && PyErr_Occurred())
                return NULL;
            if (end >= pos)
                break;
            k++;
        }
        if (k == n_ends)
            break;
        if (end > n || end < pos)
            break; /* not an end in this text: Python's loop decides */
        /* start = view.rfind("\n", pos, end) + 1 or pos */
        Py_ssize_t start = pos;
        for (Py_ssize_t i = end - 1; i >= pos; i--) {
            if (data[i] == '\n') {
                start = i + 1;
                break;
            }
        }
        Py_ssize_t len = end - start;
        const char *line = data + start;
        if (len > shape_max)
            break;
        /* A wide chunk's line with a placeholder: its own text (Python: text[start:end]). */
        PyObject *own = NULL;
        if (wide && memchr(line, '?', (size_t)len) != NULL) {
            own = PyUnicode_Substring(text, start, end);
            if (own == NULL)
                return NULL;
        }
        if (has_cr && memchr(line, '\r', (size_t)len) != NULL) {
            /* A log line glued to a bar's redraws is cut off it in Python. */
            PyObject *whole = own;
            if (whole == NULL)
                whole = PyUnicode_Substring(view, start, end);
            else
                Py_INCREF(whole);
            if (whole == NULL)
                return NULL;
            PyObject *cut = PyObject_CallOneArg(glued, whole);
            Py_DECREF(whole);
            if (cut == NULL) {
                Py_XDECREF(own);
                return NULL;
            }
            int truth = PyObject_IsTrue(cut);
            Py_DECREF(cut);
            if (truth != 0) {
                Py_XDECREF(own);
                if (truth < 0)
                    return NULL;
                break;
            }
        }
        PyObject *shape;
        int normalized = 0; /* the shape's digits made 0 already (``norm``) */
        if (own == NULL && len <= TR_NORM_MAX) {
            /* line_shape into ``norm``; a shape this call saw lately is that
             * very bytes object (its hash kept: the cache's lookup hashes
             * nothing), else a new one, remembered below once the cache
             * knows it. Equal bytes either way. */
            for (Py_ssize_t i = 0; i < len; i++) {
                char c = line[i];
                norm[i] = c >= '1' && c <= '9' ? '0' : c;
            }
            shape = NULL;
            for (int r = 0; r < TR_RECENT; r++) {
                PyObject *known = recent[r];
                if (known != NULL && PyBytes_GET_SIZE(known) == len && memcmp(PyBytes_AS_STRING(known), norm, (size_t)len) == 0) {
                    shape = Py_NewRef(known);
                    break;
                }
            }
            if (shape == NULL) {
                shape = PyBytes_FromStringAndSize(norm, len);
                fresh = 1;
            }
            normalized = 1;
        } else if (own == NULL) {
            shape = PyBytes_FromStringAndSize(line, len);
        } else {
            /* line_shape: its UTF-8, surrogatepass (a lone surrogate encodes). */
            PyObject *utf8 = PyUnicode_AsEncodedString(own, "utf-8", "surrogatepass");
            if (utf8 == NULL) {
                Py_DECREF(own);
                return NULL;
            }
            shape = PyBytes_FromStringAndSize(PyBytes_AS_STRING(utf8), PyBytes_GET_SIZE(utf8));
            Py_DECREF(utf8);
        }
        if (shape == NULL) {
            Py_XDECREF(own);
            return NULL;
        }
        if (!normalized) {
            char *sd = PyBytes_AS_STRING(shape);
            Py_ssize_t shape_len = PyBytes_GET_SIZE(shape);
            for (Py_ssize_t i = 0; i < shape_len; i++) {
                if (sd[i] >= '1' && sd[i] <= '9')
                    sd[i] = '0';
            }
        }
        PyObject *entry = PyDict_GetItemWithError(cache, shape); /* borrowed */
        if (entry != NULL && fresh) {
            /* A shape the cache knows: remembered for the lines after (the oldest let go). */
            Py_XSETREF(recent[next_recent], Py_NewRef(shape));
            next_recent = (next_recent + 1) % TR_RECENT;
        }
        fresh = 0;
        if (entry == NULL) {
            Py_DECREF(shape);
            Py_XDECREF(own);
            if (PyErr_Occurred())
                return NULL;
            break; /* a new shape: Python works out its flags and lane */
        }
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
            Py_DECREF(shape);
            Py_XDECREF(own);
            break;
        }
        long flags = PyLong_AsLong(PyTuple_GET_ITEM(entry, 0));
        if (flags == -1 && PyErr_Occurred()) {
            Py_DECREF(shape);
            Py_XDECREF(own);
            return NULL;
        }
        PyObject *lane = PyTuple_GET_ITEM(entry, 1);
        if (lane == Py_None) {
            if (flags == 0) {
                Py_DECREF(shape);
                Py_XDECREF(own);
                k++;
                pos = end + 1;
                continue; /* a candidate that holds nothing after all */
            }
            if (!(flags == progress_flag && fast && !(len > 0 && line[0] == '['))) {
                Py_DECREF(shape);
                Py_XDECREF(own);
                break; /* read on its own */
            }
            lane = shape; /* a plain progress line: its shape for a lane */
        }
        PyObject *taken = own != NULL ? own : PyUnicode_Substring(view, start, end);
        PyObject *s = PyLong_FromSsize_t(start);
        PyObject *e = PyLong_FromSsize_t(end);
        int failed = taken == NULL || s == NULL || e == NULL || PyList_Append(lines, taken) < 0 ||
                     PyList_Append(starts, s) < 0 || PyList_Append(ends_out, e) < 0 ||
                     PyList_Append(lanes, lane) < 0;
        Py_XDECREF(taken);
        Py_XDECREF(s);
        Py_XDECREF(e);
        Py_DECREF(shape);
        if (failed)
            return NULL;
        k++;
        pos = end + 1;
    }
    return Py_BuildValue("nn", k, pos);
}

/* slide_median(sorted, leaving, values, odd) -> medians
 *
 * ``loss_steps._smoothed``'s loop: for each pair of ``leaving`` and
 * ``values`` (zip: the shorter decides), drop the first value of
 * ``sorted`` equal to the leaving one (``list.remove``), put the new one
 * after its equals (``insort``), and append the window's median: its
 * middle value (``odd``), else half the sum of its middle two. ``sorted``
 * is changed in place, as the loop changes it. Every value must be a
 * finite float and every leaving value present (the caller checks the
 * first; the window holds the second): else ValueError and nothing is
 * changed, and the caller runs its own loop. */
static PyObject *
slide_median(PyObject *self, PyObject *args)
{
    PyObject *sorted_list, *leaving, *values;
    int odd;
    if (!PyArg_ParseTuple(args, "O!O!O!p", &PyList_Type, &sorted_list, &PyList_Type, &leaving, &PyList_Type,
                          &values, &odd))
        return NULL;
    Py_ssize_t size = PyList_GET_SIZE(sorted_list);
    Py_ssize_t steps = PyList_GET_SIZE(leaving);
    if (PyList_GET_SIZE(values) < steps)
        steps = PyList_GET_SIZE(values);
    if (size == 0) {
        PyErr_SetString(PyExc_ValueError, "slide_median: an empty window");
        return NULL;
    }
    double *s = PyMem_Malloc(sizeof(double) * (size_t)size);
    if (s == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *v = PyList_GET_ITEM(sorted_list, i);
        if (!PyFloat_CheckExact(v) || !isfinite(PyFloat_AS_DOUBLE(v))) {
            PyMem_Free(s);
            PyErr_SetString(PyExc_ValueError, "slide_median: a value that is not a finite float");
            return NULL;
        }
        s[i] = PyFloat_AS_DOUBLE(v);
    }
    PyObject *out = PyList_New(steps);
    if (out == NULL) {
        PyMem_Free(s);
        return NULL;
    }
    Py_ssize_t mid = size / 2;
    for (Py_ssize_t j = 0; j < steps; j++) {
        PyObject *o = PyList_GET_ITEM(leaving, j), *v = PyList_GET_ITEM(values, j);
        if (!PyFloat_CheckExact(o) || !PyFloat_CheckExact(v) || !isfinite(PyFloat_AS_DOUBLE(v))) {
            goto refuse;
        }
        double old = PyFloat_AS_DOUBLE(o), value = PyFloat_AS_DOUBLE(v);
        Py_ssize_t at = 0;
        while (at < size && s[at] != old)
            at++;
        if (at == size)
            goto refuse;
        memmove(s + at, s + at + 1, sizeof(double) * (size_t)(size - 1 - at));
        /* insort: after every value <= the new one (bisect_right) */
        Py_ssize_t lo = 0, hi = size - 1;
        while (lo < hi) {
            Py_ssize_t m = (lo + hi) / 2;
            if (value < s[m])
                hi = m;
            else
                lo = m + 1;
        }
        memmove(s + lo + 1, s + lo, sizeof(double) * (size_t)(size - 1 - lo));
        s[lo] = value;
        double median = odd ? s[mid] : 0.5 * (s[mid - 1] + s[mid]);
        PyObject *m = PyFloat_FromDouble(median);
        if (m == NULL) {
            Py_DECREF(out);
            PyMem_Free(s);
            return NULL;
        }
        PyList_SET_ITEM(out, j, m);
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *f = PyFloat_FromDouble(s[i]);
        if (f == NULL) {
            Py_DECREF(out);
            PyMem_Free(s);
            return NULL;
        }
        if (PyList_SetItem(sorted_list, i, f) < 0) {
            Py_DECREF(out);
            PyMem_Free(s);
            return NULL;
        }
    }
    PyMem_Free(s);
    return out;
refuse:
    Py_DECREF(out);
    PyMem_Free(s);
    PyErr_SetString(PyExc_ValueError, "slide_median: a value that is not a finite float, or not in the window");
    return NULL;
}

/* ascii_view(text) -> str
 *
 * ``LogStream._view``: ``text`` itself where it is ASCII, else the same
 * text with '?' for each character outside ASCII (one per character, so
 * offsets stay those of ``text``), as ``text.encode("ascii", "replace")
 * .decode("ascii")`` makes it, in one pass and one string. A tqdm bar's
 * block characters make most chunks of a progress-heavy log wide. */
static PyObject *
ascii_view(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "ascii_view: a str");
        return NULL;
    }
    if (PyUnicode_IS_ASCII(text) && PyUnicode_CheckExact(text))
        return Py_NewRef(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    PyObject *out = PyUnicode_New(n, 127);
    if (out == NULL)
        return NULL;
    Py_UCS1 *dst = PyUnicode_1BYTE_DATA(out);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *src = data;
        for (Py_ssize_t i = 0; i < n; i++)
            dst[i] = src[i] < 128 ? src[i] : '?';
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *src = data;
        for (Py_ssize_t i = 0; i < n; i++)
            dst[i] = src[i] < 128 ? (Py_UCS1)src[i] : '?';
    } else {
        const Py_UCS4 *src = data;
        for (Py_ssize_t i = 0; i < n; i++)
            dst[i] = src[i] < 128 ? (Py_UCS1)src[i] : '?';
    }
    return out;
}

/* ascii_bytes(text) -> memoryview
 *
 * The bytes of an ASCII ``text``, read-only, without a copy: a memoryview
 * of the string's own characters (one byte each), which it keeps alive.
 * ``HyperscanScanner.ends`` scans a chunk's view so, where it made
 * ``text.encode("ascii")`` (a copy of every byte of a replayed log) before.
 * A str that is not ASCII (or a subclass) is a ValueError (TypeError for
 * no str). */
typedef struct {
    PyObject_HEAD
    PyObject *owner; /* the exact, ASCII str whose characters are the bytes */
} AsciiBytes;

static int
ascii_bytes_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    PyObject *owner = ((AsciiBytes *)self)->owner;
    return PyBuffer_FillInfo(view, self, (void *)PyUnicode_DATA(owner), PyUnicode_GET_LENGTH(owner), 1, flags);
}

static void
ascii_bytes_dealloc(PyObject *self)
{
    Py_XDECREF(((AsciiBytes *)self)->owner);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs ascii_bytes_buffer = {ascii_bytes_getbuffer, NULL};

static PyTypeObject AsciiBytesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dflash_watch.parsers._native.AsciiBytes",
    .tp_basicsize = sizeof(AsciiBytes),
    .tp_dealloc = ascii_bytes_dealloc,
    .tp_as_buffer = &ascii_bytes_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An ASCII str's characters as a read-only buffer (ascii_bytes).",
};

static PyObject *
ascii_bytes(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "ascii_bytes: a str");
        return NULL;
    }
    if (!PyUnicode_CheckExact(text) || !PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "ascii_bytes: an ASCII str");
        return NULL;
    }
    AsciiBytes *owner = PyObject_New(AsciiBytes, &AsciiBytesType);
    if (owner == NULL)
        return NULL;
    owner->owner = Py_NewRef(text);
    PyObject *view = PyMemoryView_FromObject((PyObject *)owner);
    Py_DECREF(owner); /* (the memoryview holds it) */
    return view;
}

/* fresh_series(steps, times, ranks, bars, known0, known1)
 *     -> (steps0, times0, steps1, times1) | None
 *
 * ``steps.SeriesDeduper.peek``'s common case, steady training of one
 * rank: no line has a rank, every step is an int, each series' steps
 * (``bars``: False the step lines', True a tqdm bar's) go strictly up
 * through the run, and none of the steps its deduper remembers (the keys
 * of ``known0`` / ``known1``) lies within the run's steps of that series.
 * Then every line is new (``StepDeduper.peek``'s all-new answer for each
 * series), and this gives each series' steps and times, picked in one
 * pass. None (Python reads the run) for anything else: a rank, a step
 * that is not exactly an int or not within 64 bits, a bool that is not
 * exactly True or False, a step not above its series' last, a remembered
 * step that is not exactly an int or lies within the run's range, an
 * empty run, lists of other lengths or types. Reads only (no Python code
 * runs) once its lists are allocated. */
static PyObject *
fresh_series(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "fresh_series: six arguments");
        return NULL;
    }
    PyObject *steps = args[0], *times = args[1], *ranks = args[2], *bars = args[3];
    PyObject *known[2] = {args[4], args[5]};
    if (!PyList_CheckExact(steps) || !PyList_CheckExact(times) || !PyList_CheckExact(ranks) ||
        !PyList_CheckExact(bars) || !PyDict_CheckExact(known[0]) || !PyDict_CheckExact(known[1]))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(steps);
    if (n == 0)
        Py_RETURN_NONE;
    /* Room for every line in each output: allocated before anything is
     * read, so that no collection (whose callbacks may change the caller's
     * lists) comes between the reads. Cut to what was taken after. */
    PyObject *out[4] = {PyList_New(n), PyList_New(n), PyList_New(n), PyList_New(n)};
    Py_ssize_t taken[2] = {0, 0};
    long long first[2] = {0, 0}, last[2] = {0, 0};
    int ok = out[0] != NULL && out[1] != NULL && out[2] != NULL && out[3] != NULL;
    if (ok && (PyList_GET_SIZE(steps) != n || PyList_GET_SIZE(times) != n || PyList_GET_SIZE(ranks) != n ||
               PyList_GET_SIZE(bars) != n))
        ok = 0;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *step = PyList_GET_ITEM(steps, i), *bar = PyList_GET_ITEM(bars, i);
        if (PyList_GET_ITEM(ranks, i) != Py_None || (bar != Py_True && bar != Py_False) || !PyLong_CheckExact(step)) {
            ok = 0;
            break;
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(step, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        int k = bar == Py_True;
        if (taken[k] == 0)
            first[k] = v;
        else if (v <= last[k]) {
            ok = 0;
            break;
        }
        last[k] = v;
        PyObject *t = PyList_GET_ITEM(times, i);
        PyList_SET_ITEM(out[2 * k], taken[k], Py_NewRef(step));
        PyList_SET_ITEM(out[2 * k + 1], taken[k], Py_NewRef(t));
        taken[k]++;
    }
    /* The steps each deduper remembers: none within its series' run. */
    for (int k = 0; ok && k < 2; k++) {
        if (taken[k] == 0)
            continue;
        Py_ssize_t at = 0;
        PyObject *key, *value;
        while (PyDict_Next(known[k], &at, &key, &value)) {
            if (!PyLong_CheckExact(key)) {
                ok = 0;
                break;
            }
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
            if (v == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                ok = 0;
                break;
            }
            if (!overflow && v >= first[k] && v <= last[k]) {
                ok = 0;
                break;
            }
        }
    }
    for (int j = 0; j < 4; j++)
        if (out[j] != NULL)
            Py_SET_SIZE(out[j], taken[j / 2]); /* the rest were never set */
    PyObject *result = NULL;
    if (ok)
        result = PyTuple_Pack(4, out[0], out[1], out[2], out[3]);
    int failed = out[0] == NULL || out[1] == NULL || out[2] == NULL || out[3] == NULL;
    for (int j = 0; j < 4; j++)
        Py_XDECREF(out[j]);
    if (failed)
        return NULL;
    if (!ok)
        Py_RETURN_NONE;
    return result;
}

/* lane_groups(lines, lanes) -> dict | None
 *
 * ``lanes._groups``' picking of a run's lines by lane: for each item of
 * ``lanes`` that is not exactly bytes (a plain progress line), by
 * identity, in the order first seen, ``{id(lane): (lane, its lines, its
 * picks)}``: its lines as ``list(compress(lines, picks))``, its picks a
 * bool per line of the run as ``list(map(eq, ids, repeat(id(lane))))``.
 * One pass for all lanes instead of a list of ids and two passes a lane.
 * None (Python picks) for more than ``LANES_MAX`` lanes or lists of other
 * types or lengths. */
#define LANES_MAX 16
static PyObject *
lane_groups(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "lane_groups: two arguments");
        return NULL;
    }
    PyObject *lines = args[0], *lanes = args[1];
    if (!PyList_CheckExact(lines) || !PyList_CheckExact(lanes))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(lanes);
    if (PyList_GET_SIZE(lines) != n)
        Py_RETURN_NONE;
    /* The lanes, held as they are found (no allocation in this pass). */
    PyObject *found[LANES_MAX];
    Py_ssize_t counts[LANES_MAX];
    int k = 0, ok = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *lane = PyList_GET_ITEM(lanes, i);
        if (Py_IS_TYPE(lane, &PyBytes_Type))
            continue;
        int j = 0;
        while (j < k && found[j] != lane)
            j++;
        if (j == k) {
            if (k == LANES_MAX) {
                ok = 0;
                break;
            }
            found[k] = Py_NewRef(lane);
            counts[k++] = 0;
        }
        counts[j]++;
    }
    PyObject *picked[LANES_MAX], *picks[LANES_MAX];
    for (int j = 0; j < k; j++) {
        picked[j] = ok ? PyList_New(counts[j]) : NULL;
        picks[j] = ok ? PyList_New(n) : NULL;
        if (picked[j] == NULL || picks[j] == NULL)
            ok = 0;
    }
    /* An allocation may have run the collector, and its callbacks changed
     * the caller's lists: read again, and give up on any difference. */
    if (ok && (PyList_GET_SIZE(lanes) != n || PyList_GET_SIZE(lines) != n))
        ok = 0;
    Py_ssize_t filled[LANES_MAX] = {0};
    int order = 0; /* each lane first met in the order found above */
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *lane = PyList_GET_ITEM(lanes, i);
        int mine = -1;
        if (!Py_IS_TYPE(lane, &PyBytes_Type)) {
            for (int j = 0; j < k; j++)
                if (found[j] == lane) {
                    mine = j;
                    break;
                }
            if (mine < 0 || filled[mine] == counts[mine] || (filled[mine] == 0 && mine != order++)) {
                ok = 0;
                break;
            }
            PyList_SET_ITEM(picked[mine], filled[mine]++, Py_NewRef(PyList_GET_ITEM(lines, i)));
        }
        for (int j = 0; j < k; j++)
            PyList_SET_ITEM(picks[j], i, Py_NewRef(j == mine ? Py_True : Py_False));
    }
    for (int j = 0; ok && j < k; j++)
        if (filled[j] != counts[j])
            ok = 0;
    PyObject *out = ok ? PyDict_New() : NULL;
    for (int j = 0; out != NULL && j < k; j++) {
        PyObject *key = PyLong_FromVoidPtr(found[j]);
        PyObject *value = key == NULL ? NULL : PyTuple_Pack(3, found[j], picked[j], picks[j]);
        if (value == NULL || PyDict_SetItem(out, key, value) < 0)
            Py_CLEAR(out);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    int failed = PyErr_Occurred() != NULL;
    for (int j = 0; j < k; j++) {
        /* A list left part-filled after a give-up is cut to its items. */
        if (picked[j] != NULL && filled[j] < counts[j])
            Py_SET_SIZE(picked[j], filled[j]);
        if (picks[j] != NULL && !ok) {
            Py_ssize_t set = 0;
            while (set < n && PyList_GET_ITEM(picks[j], set) != NULL)
                set++;
            Py_SET_SIZE(picks[j], set);
        }
        Py_XDECREF(picked[j]);
        Py_XDECREF(picks[j]);
        Py_DECREF(found[j]);
    }
    if (failed) {
        Py_XDECREF(out);
        return NULL;
    }
    if (out == NULL)
        Py_RETURN_NONE;
    return out;
}

/* sources(prefix, numbers, lo, hi, picks) -> list[str] | None
 *
 * Events' sources of a run: ``prefix + str(number)`` for each of
 * ``numbers[lo:hi]`` whose pick (``picks[i]``, None: every one) is True,
 * as ``map(prefix.__add__, map(str, compress(numbers, picks)))`` makes
 * them, each string written once instead of a digit string and a
 * concatenation. None (Python makes them) for a prefix that is not ASCII,
 * a number that is not exactly a non-negative int within 64 bits, a pick
 * that is not exactly True or False, or lists of other types or lengths. */
static PyObject *
sources(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "sources: five arguments");
        return NULL;
    }
    PyObject *prefix = args[0], *numbers = args[1], *picks = args[4];
    Py_ssize_t lo = PyLong_AsSsize_t(args[2]), hi = PyLong_AsSsize_t(args[3]);
    if ((lo == -1 || hi == -1) && PyErr_Occurred())
        return NULL;
    if (!PyUnicode_CheckExact(prefix) || !PyUnicode_IS_ASCII(prefix) || !PyList_CheckExact(numbers) ||
        (picks != Py_None && !PyList_CheckExact(picks)))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(numbers);
    if (lo < 0 || hi > n || lo > hi || (picks != Py_None && PyList_GET_SIZE(picks) != n))
        Py_RETURN_NONE;
    Py_ssize_t count = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        PyObject *pick = picks == Py_None ? Py_True : PyList_GET_ITEM(picks, i);
        if (pick == Py_True)
            count++;
        else if (pick != Py_False)
            Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(count);
    if (out == NULL)
        return NULL;
    Py_ssize_t plen = PyUnicode_GET_LENGTH(prefix), made = 0;
    int ok = 1;
    for (Py_ssize_t i = lo; ok && i < hi; i++) {
        /* Read again each time: an allocation may have run the collector,
         * whose callbacks may change the caller's lists. */
        if (PyList_GET_SIZE(numbers) != n || (picks != Py_None && PyList_GET_SIZE(picks) != n)) {
            ok = 0;
            break;
        }
        if (picks != Py_None && PyList_GET_ITEM(picks, i) != Py_True)
            continue;
        PyObject *number = PyList_GET_ITEM(numbers, i);
        int overflow = 0;
        long long v = PyLong_CheckExact(number) ? PyLong_AsLongLongAndOverflow(number, &overflow) : -1;
        if (v < 0 || overflow || made == count) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        char digits[24];
        int nd = 0;
        do {
            digits[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        PyObject *source = PyUnicode_New(plen + nd, 127);
        if (source == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        Py_UCS1 *data = PyUnicode_1BYTE_DATA(source);
        memcpy(data, PyUnicode_1BYTE_DATA(prefix), (size_t)plen);
        for (int d = 0; d < nd; d++)
            data[plen + d] = (Py_UCS1)digits[nd - 1 - d];
        PyList_SET_ITEM(out, made++, source);
    }
    if (!ok || made != count) {
        Py_SET_SIZE(out, made); /* the rest were never set */
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

/* newlines(data) -> int
 *
 * ``data.count(b"\n")`` for any buffer (bytes, bytearray): the line count
 * ``LineSplitter`` takes of each chunk it hands on. CPython counts one
 * byte at a time; memchr jumps from newline to newline (lines are tens
 * to hundreds of bytes), four to five times faster on a log. */
static PyObject *
newlines(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        /* A buffer that is not contiguous (a strided memoryview): its
         * bytes copied, as bytes(data) has them. */
        if (!PyErr_ExceptionMatches(PyExc_BufferError) || !PyObject_CheckBuffer(arg))
            return NULL;
        PyErr_Clear();
        PyObject *flat = PyBytes_FromObject(arg);
        if (flat == NULL)
            return NULL;
        PyObject *count = newlines(self, flat);
        Py_DECREF(flat);
        return count;
    }
    const char *at = view.buf, *stop = (const char *)view.buf + view.len;
    Py_ssize_t count = 0;
    while (at < stop && (at = memchr(at, '\n', (size_t)(stop - at))) != NULL) {
        count++;
        at++;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}

/* match_end(id, start, end, flags, ends) -> None
 *
 * The Hyperscan scanner's match handler (``HyperscanScanner._scan``):
 * ``ends.append(end - 1)``, the line's newline. Called once per candidate
 * line (a third of a progress-heavy log's lines) with the five arguments
 * the hyperscan binding passes; a Python function there cost a frame per
 * line. */
static PyObject *
match_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyList_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError, "match_end: (id, start, end, flags, ends: list)");
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred())
        return NULL;
    PyObject *at = PyLong_FromSsize_t(end - 1);
    if (at == NULL)
        return NULL;
    int failed = PyList_Append(args[4], at);
    Py_DECREF(at);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

/* utf8_text(data) -> str | None
 *
 * ``str(data, "utf-8", "replace")`` of a chunk of log bytes, where the
 * chunk is all ASCII or valid UTF-8 whose widest character is in the Basic
 * Multilingual Plane and past Latin-1 (a tqdm block bar's U+2588): the
 * same str, kind and all. None for any other chunk (an invalid or
 * truncated sequence, a character past U+FFFF, Latin-1 only): the caller
 * decodes it as before, so every 'replace' rule stays CPython's.
 *
 * Why: one such character makes CPython's decoder start over in a wider
 * writer and go on in smaller steps (1.0 ms a MiB of the progress shape,
 * against 0.06 for ASCII; ~7% of that replay). Here one pass checks and
 * counts, a second writes, both across ASCII 16 bytes at a time with SSE2
 * (64 for the check), 8 without: 0.47 ms a MiB. The helpers below first. */
/* How many bytes from p on are ASCII: 64 and then 16 at a time where SSE2
 * is (every x86-64), else 8. */
static Py_ssize_t
ascii_run(const unsigned char *p, const unsigned char *end)
{
    const unsigned char *at = p;
#ifdef __SSE2__
    while (end - at >= 64) {  /* four loads, one test: most of a log is ASCII */
        __m128i any = _mm_or_si128(
            _mm_or_si128(_mm_loadu_si128((const __m128i *)at), _mm_loadu_si128((const __m128i *)(at + 16))),
            _mm_or_si128(_mm_loadu_si128((const __m128i *)(at + 32)), _mm_loadu_si128((const __m128i *)(at + 48))));
        if (_mm_movemask_epi8(any))
            break;
        at += 64;
    }
    while (end - at >= 16) {
        int high = _mm_movemask_epi8(_mm_loadu_si128((const __m128i *)at));
        if (high)
            return (at - p) + __builtin_ctz((unsigned)high);
        at += 16;
    }
#endif
    while (end - at >= 8) {
        uint64_t word;
        memcpy(&word, at, 8);
        if (word & UINT64_C(0x8080808080808080))
            break;
        at += 8;
    }
    while (at < end && *at < 0x80)
        at++;
    return at - p;
}

/* out[i] = p[i] for n ASCII bytes. */
static void
widen(const unsigned char *p, Py_ssize_t n, Py_UCS2 *out)
{
    Py_ssize_t i = 0;
#ifdef __SSE2__
    const __m128i zero = _mm_setzero_si128();
    for (; n - i >= 16; i += 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(p + i));
        _mm_storeu_si128((__m128i *)(out + i), _mm_unpacklo_epi8(bytes, zero));
        _mm_storeu_si128((__m128i *)(out + i + 8), _mm_unpackhi_epi8(bytes, zero));
    }
#endif
    for (; i < n; i++)
        out[i] = p[i];
}

static int
utf8_measure(const unsigned char *p, const unsigned char *end, Py_ssize_t *chars, Py_UCS4 *maxchar)
{
    Py_ssize_t n = 0;
    Py_UCS4 top = 0;
    while (p < end) {
        Py_ssize_t ascii = ascii_run(p, end);
        p += ascii;
        n += ascii;
        if (p == end)
            break;
        unsigned char c = *p;
        Py_UCS4 cp;
        if (c < 0x80) {
            p++;
            n++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (end - p < 2 || (p[1] & 0xC0) != 0x80)
                return 0;
            cp = ((Py_UCS4)(c & 0x1F) << 6) | (p[1] & 0x3F);
            p += 2;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0))
                return 0;  /* overlong; a surrogate */
            cp = ((Py_UCS4)(c & 0x0F) << 12) | ((Py_UCS4)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
            p += 3;
        }
        else
            return 0;  /* four bytes (past U+FFFF), or not a lead byte */
        n++;
        if (cp > top)
            top = cp;
    }
    *chars = n;
    *maxchar = top;
    return 1;
}

static PyObject *
utf8_text(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf, *end = p + view.len;
    Py_ssize_t chars;
    Py_UCS4 maxchar;
    PyObject *text = NULL;
    if (!utf8_measure(p, end, &chars, &maxchar) || (maxchar != 0 && maxchar < 0x100)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    if (maxchar == 0) {  /* ASCII: the bytes as they are */
        text = PyUnicode_New(view.len, 127);
        if (text != NULL)
            memcpy(PyUnicode_1BYTE_DATA(text), p, (size_t)view.len);
        PyBuffer_Release(&view);
        return text;
    }
    text = PyUnicode_New(chars, maxchar);
    if (text == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_UCS2 *out = PyUnicode_2BYTE_DATA(text), *out_end = out + chars;
    int same = 1; /* the bytes as measured (a buffer another process or thread writes may not be) */
    while (same && p < end) {
        Py_ssize_t ascii = ascii_run(p, end);
        if (ascii > out_end - out) {
            same = 0;
            break;
        }
        widen(p, ascii, out);
        p += ascii;
        out += ascii;
        if (p == end)
            break;
        unsigned char c = *p;  /* a lead byte: measured, so checked */
        Py_ssize_t width = c < 0xE0 ? 2 : 3;
        if (out == out_end || end - p < width || c < 0xC2 || c > 0xEF) {
            same = 0;
            break;
        }
        if (width == 2)
            *out++ = (Py_UCS2)(((c & 0x1F) << 6) | (p[1] & 0x3F));
        else
            *out++ = (Py_UCS2)(((c & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F));
        p += width;
    }
    PyBuffer_Release(&view);
    if (!same || out != out_end) {
        Py_DECREF(text);
        Py_RETURN_NONE; /* changed under us: Python decodes what is there now */
    }
    return text;
}

/* metric_names(metrics) -> set | None
 *
 * ``{m[0] for m in chain.from_iterable(metrics)}`` for a list of metric
 * tuples (each a tuple of (name, value) tuples, each name a str): the
 * names a run of step lines carries, added in the same order. None
 * (Python reads them) for anything else, or where a name cannot be added. The loss and padding
 * detectors ask it of every run, a few names a line. */
static PyObject *
metric_names(PyObject *self, PyObject *metrics)
{
    if (!PyList_Check(metrics))
        Py_RETURN_NONE;
    PyObject *out = PySet_New(NULL);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(metrics); i++) {
        PyObject *line = PyList_GET_ITEM(metrics, i);
        if (!PyTuple_CheckExact(line))
            goto python;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(line); j++) {
            PyObject *pair = PyTuple_GET_ITEM(line, j);
            /* An exact str's hash and equality run no Python code: the
             * list and its tuples cannot change under the loop. */
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) < 1 ||
                !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)))
                goto python;
            if (PySet_Add(out, PyTuple_GET_ITEM(pair, 0)) < 0) {
                PyErr_Clear();
                goto python;
            }
        }
    }
    return out;
python:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/* Python's ``x // w`` of two floats (``float_floor_div``): the quotient
 * by ``fmod``, taken to the nearest whole number that is not above it.
 * The same operations in the same order, so the same double, a bucket's
 * key at an edge included. ``w`` is never 0 here. */
static double
py_floor_div(double x, double w)
{
    double mod = fmod(x, w);
    double div = (x - mod) / w;
    if (mod) {
        if ((w < 0) != (mod < 0)) {
            mod += w;
            div -= 1.0;
        }
    }
    if (div) {
        double whole = floor(div);
        if (div - whole > 0.5)
            whole += 1.0;
        return whole;
    }
    return copysign(0.0, x / w);
}

/* fold_buckets(times, values, width, key, o_t, o_min, o_max, o_sum, o_n)
 *     -> (closed, key, o_t, o_min, o_max, o_sum, o_n) | None
 *
 * ``SeriesHistory._extend_buckets``: a batch of samples (times in order,
 * values finite) folded into one tier's buckets of ``width`` seconds, as
 * ``append`` folds them one by one: a sample whose ``t // width`` is the
 * open bucket's ``key`` goes into its min, max and running sum (added in
 * order), any other closes it and opens its own. ``closed``: the buckets
 * closed, flat (t, min, max, mean, ...), for the caller to push into its
 * ring in order; then the open bucket's state. An item of either list
 * that is not a float, or lists of unequal length: None, and the caller
 * folds in Python. The dashboard's catch-up folds every logged step
 * into two tiers per series: in Python, min/max/sum over each bucket's
 * slice cost a tenth of its judging. */
static PyObject *
fold_buckets(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 || !PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "fold_buckets(times: list, values: list, width, key, o_t, o_min, o_max, o_sum, o_n)");
        return NULL;
    }
    PyObject *times = args[0], *values = args[1];
    Py_ssize_t n = PyList_GET_SIZE(times);
    if (PyList_GET_SIZE(values) != n)
        Py_RETURN_NONE;
    double width = PyFloat_AsDouble(args[2]);
    double key = PyFloat_AsDouble(args[3]);
    double o_t = PyFloat_AsDouble(args[4]);
    double o_min = PyFloat_AsDouble(args[5]);
    double o_max = PyFloat_AsDouble(args[6]);
    double o_sum = PyFloat_AsDouble(args[7]);
    long long o_n = PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred())
        return NULL;
    if (width <= 0.0)
        Py_RETURN_NONE;
    PyObject **ts = ((PyListObject *)times)->ob_item, **vs = ((PyListObject *)values)->ob_item;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyFloat_CheckExact(ts[i]) || !PyFloat_CheckExact(vs[i]))
            Py_RETURN_NONE;
    }
    PyObject *closed = PyList_New(0);
    if (closed == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        double t = PyFloat_AS_DOUBLE(ts[i]), v = PyFloat_AS_DOUBLE(vs[i]);
        double k = py_floor_div(t, width);
        if (k != key) {
            if (o_n) {
                double row[4] = {o_t, o_min, o_max, o_sum / (double)o_n};
                for (int f = 0; f < 4; f++) {
                    PyObject *x = PyFloat_FromDouble(row[f]);
                    if (x == NULL || PyList_Append(closed, x) < 0) {
                        Py_XDECREF(x);
                        Py_DECREF(closed);
                        return NULL;
                    }
                    Py_DECREF(x);
                }
            }
            key = k;
            o_t = k * width;
            o_min = o_max = o_sum = v;
            o_n = 1;
        } else {
            if (v < o_min)
                o_min = v;
            else if (v > o_max)
                o_max = v;
            o_sum += v;
            o_n += 1;
        }
    }
    return Py_BuildValue("(NdddddL)", closed, key, o_t, o_min, o_max, o_sum, o_n);
}

/* window_swap(sorted, leaving, value) -> float | None
 *
 * ``RankState._interval``'s slide of a full window kept sorted: drop the
 * first item of ``sorted`` equal to ``leaving`` (``bisect_left``, then
 * ``del``), put ``value`` after its equals (``insort``) and give the mean
 * of the middle two, ``(a + b) / 2`` (an even count). In place, moving
 * the list's items, not copying them. Every item and both arguments must
 * be floats, not NaN, the count even and ``leaving`` there: else None and
 * nothing changed, and the caller slides in Python. A 64-rank log slides
 * a window at nearly every line. */
static PyObject *
window_swap(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "window_swap(sorted: list, leaving: float, value: float)");
        return NULL;
    }
    PyObject *list = args[0], *leaving = args[1], *value = args[2];
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n < 2 || n % 2 || !PyFloat_CheckExact(leaving) || !PyFloat_CheckExact(value))
        Py_RETURN_NONE;
    double old = PyFloat_AS_DOUBLE(leaving), v = PyFloat_AS_DOUBLE(value);
    if (isnan(old) || isnan(v))
        Py_RETURN_NONE;
    PyObject **items = ((PyListObject *)list)->ob_item;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyFloat_CheckExact(items[i]) || isnan(PyFloat_AS_DOUBLE(items[i])))
            Py_RETURN_NONE;
    }
    Py_ssize_t lo = 0, hi = n; /* bisect_left */
    while (lo < hi) {
        Py_ssize_t m = (lo + hi) / 2;
        if (PyFloat_AS_DOUBLE(items[m]) < old)
            lo = m + 1;
        else
            hi = m;
    }
    if (lo == n || PyFloat_AS_DOUBLE(items[lo]) != old)
        Py_RETURN_NONE; /* not there: Python's del would take another */
    PyObject *gone = items[lo];
    memmove(items + lo, items + lo + 1, sizeof(PyObject *) * (size_t)(n - 1 - lo));
    lo = 0;
    hi = n - 1; /* insort: bisect_right over the n - 1 left */
    while (lo < hi) {
        Py_ssize_t m = (lo + hi) / 2;
        if (v < PyFloat_AS_DOUBLE(items[m]))
            hi = m;
        else
            lo = m + 1;
    }
    memmove(items + lo + 1, items + lo, sizeof(PyObject *) * (size_t)(n - 1 - lo));
    items[lo] = Py_NewRef(value);
    Py_DECREF(gone);
    Py_ssize_t mid = n / 2;
    return PyFloat_FromDouble((PyFloat_AS_DOUBLE(items[mid - 1]) + PyFloat_AS_DOUBLE(items[mid])) / 2);
}

/* cut_numbers(lines, start, stop, ints) -> list | None
 *
 * ``progress.columns``' reading of one number column: each line's
 * ``line[start:stop]`` as ``int`` (``ints``) or ``float`` would read it,
 * without the slice. Only what both read alike is taken: ASCII digits
 * alone for an int (at most 18), ASCII digits, '.', 'e', 'E', '+', '-'
 * for a float, the whole slice consumed (``PyOS_string_to_double``, what
 * ``float`` calls). Anything else (a slice past a line's end, a space, a
 * letter, a character outside ASCII, a number that does not parse) and
 * the answer is None: the caller reads the column in Python. */
static PyObject *
cut_numbers(PyObject *self, PyObject *args)
{
    PyObject *lines;
    Py_ssize_t start, stop;
    int ints;
    char buf[64];
    if (!PyArg_ParseTuple(args, "O!nnp", &PyList_Type, &lines, &start, &stop, &ints))
        return NULL;
    Py_ssize_t width = stop - start;
    if (start < 0 || width <= 0 || width >= (Py_ssize_t)sizeof(buf) || (ints && width > 18))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(lines);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *line = PyList_GET_ITEM(lines, j);
        if (!PyUnicode_Check(line) || PyUnicode_GET_LENGTH(line) < stop)
            goto refuse;
        int kind = PyUnicode_KIND(line);
        const void *data = PyUnicode_DATA(line);
        long long whole = 0;
        for (Py_ssize_t i = 0; i < width; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, start + i);
            if (c >= '0' && c <= '9') {
                whole = whole * 10 + (long long)(c - '0');
            } else if (ints || !(c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
                goto refuse;
            }
            buf[i] = (char)c;
        }
        buf[width] = '\0';
        PyObject *value;
        if (ints) {
            value = PyLong_FromLongLong(whole);
        } else {
            char *end = NULL;
            double v = PyOS_string_to_double(buf, &end, NULL);
            if (v == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                goto refuse;
            }
            if (end != buf + width)
                goto refuse;
            value = PyFloat_FromDouble(v);
        }
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, j, value);
    }
    return out;
refuse:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/* series_tops(steps, gaps, series, tops, silence, jitter) -> 1, 0 or -1
 *
 * ``throughput_quiet._steady``'s walk over a run's steps in order: each
 * gap must be in [0, silence) and each step known (else 0: not steady
 * training); a step at or above its series' top (``tops[series]``, a bool
 * series: index 0 or 1) becomes the top, one below it is another rank's
 * just behind when its gap is within ``jitter`` (else 0: a relaunch). 1:
 * steady, ``tops`` moved in place. -1, nothing changed: a value that is
 * not an exact int, float or bool, or an int past 64 bits; the caller
 * walks them in Python. */
static PyObject *
series_tops(PyObject *self, PyObject *args)
{
    PyObject *steps, *gaps, *series, *tops;
    double silence, jitter;
    if (!PyArg_ParseTuple(args, "O!O!O!O!dd", &PyList_Type, &steps, &PyList_Type, &gaps, &PyList_Type, &series,
                          &PyList_Type, &tops, &silence, &jitter))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(steps);
    if (PyList_GET_SIZE(gaps) < n)
        n = PyList_GET_SIZE(gaps);
    if (PyList_GET_SIZE(series) < n)
        n = PyList_GET_SIZE(series);
    if (PyList_GET_SIZE(tops) != 2)
        return PyLong_FromLong(-1);
    long long top[2];
    int overflow;
    for (int i = 0; i < 2; i++) {
        PyObject *t = PyList_GET_ITEM(tops, i);
        if (t == Py_None) {
            top[i] = 0; /* never read: the caller checked every series of the run has a top */
            continue;
        }
        if (!PyLong_CheckExact(t))
            return PyLong_FromLong(-1);
        top[i] = PyLong_AsLongLongAndOverflow(t, &overflow);
        if (overflow || (top[i] == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return PyLong_FromLong(-1);
        }
    }
    int moved[2] = {0, 0};
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *g = PyList_GET_ITEM(gaps, j), *s = PyList_GET_ITEM(steps, j), *k = PyList_GET_ITEM(series, j);
        if (!PyFloat_CheckExact(g) || (k != Py_True && k != Py_False))
            return PyLong_FromLong(-1);
        double gap = PyFloat_AS_DOUBLE(g);
        if (!(0.0 <= gap && gap < silence) || s == Py_None)
            return PyLong_FromLong(0);
        if (!PyLong_CheckExact(s))
            return PyLong_FromLong(-1);
        long long step = PyLong_AsLongLongAndOverflow(s, &overflow);
        if (overflow || (step == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return PyLong_FromLong(-1);
        }
        int i = k == Py_True;
        if (PyList_GET_ITEM(tops, i) == Py_None)
            return PyLong_FromLong(-1);
        if (step >= top[i]) {
            top[i] = step;
            moved[i] = 1;
        } else if (gap > jitter) {
            return PyLong_FromLong(0);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (!moved[i])
            continue;
        PyObject *t = PyLong_FromLongLong(top[i]);
        if (t == NULL || PyList_SetItem(tops, i, t) < 0)
            return NULL;
    }
    return PyLong_FromLong(1);
}

/* A stamp in the minute read last, as Python adds it (so the same float):
 * ``base + seconds + fraction / 10 ** frac_len``, or ``base + seconds +
 * 0.0`` without a fraction (``TimeParser._same_minute``, ``_minute_run``). */
static double
minute_value(double base, int seconds, long long frac, Py_ssize_t frac_len)
{
    double stamp = base + (double)seconds;
    if (!frac_len)
        return stamp + 0.0;
    double scale = 1.0;
    for (Py_ssize_t f = 0; f < frac_len; f++)
        scale *= 10.0;
    return stamp + (double)frac / scale;
}

/* minute_stamps(lines, i, key, base, frac_len, out) -> i
 *
 * ``TimeParser._minute_run``'s fast path from line ``i`` on: while a
 * line's first 16 characters are ``key`` (the minute read last) and its
 * seconds ``[17:19]`` are two digits under 60, append ``base + seconds +
 * fraction / 10 ** frac_len`` (``[20:20 + frac_len]``, digits), or ``base
 * + seconds + 0.0`` without a fraction, to ``out``, in Python's order of
 * operations (so the same floats). Returns the first line it did not read
 * that way, for the Python loop: another minute, or anything it does not
 * read exactly as Python would (a line outside ASCII or too short, a
 * character that is not a digit). */
static PyObject *
minute_stamps(PyObject *self, PyObject *args)
{
    PyObject *lines, *key, *out;
    Py_ssize_t i, frac_len;
    double base;
    if (!PyArg_ParseTuple(args, "O!nUdnO!", &PyList_Type, &lines, &i, &key, &base, &frac_len, &PyList_Type, &out))
        return NULL;
    if (frac_len < 0 || frac_len > 9 || !PyUnicode_IS_ASCII(key) || PyUnicode_GET_LENGTH(key) != 16)
        return PyLong_FromSsize_t(i);
    const char *k = (const char *)PyUnicode_DATA(key);
    Py_ssize_t end = 20 + frac_len, n = PyList_GET_SIZE(lines);
    for (; i < n; i++) {
        PyObject *line = PyList_GET_ITEM(lines, i);
        if (!PyUnicode_Check(line) || !PyUnicode_IS_ASCII(line) || PyUnicode_GET_LENGTH(line) < (end > 19 ? end : 19))
            break;
        const char *c = (const char *)PyUnicode_DATA(line);
        if (memcmp(c, k, 16) != 0 || c[17] < '0' || c[17] > '5' || c[18] < '0' || c[18] > '9')
            break;
        long long frac = 0;
        Py_ssize_t f = 20;
        for (; f < end && c[f] >= '0' && c[f] <= '9'; f++)
            frac = frac * 10 + (c[f] - '0');
        if (f < end)
            break;
        PyObject *v = PyFloat_FromDouble(minute_value(base, (c[17] - '0') * 10 + (c[18] - '0'), frac, frac_len));
        if (v == NULL)
            return NULL;
        int failed = PyList_Append(out, v);
        Py_DECREF(v);
        if (failed < 0)
            return NULL;
    }
    return PyLong_FromSsize_t(i);
}

/* last_minute(text, lo, hi, key, base, frac_len) -> float | None
 *
 * ``LineTimes.latest``'s first look, in the common case: the last line
 * starting in ``[lo, hi)`` (the newline at ``hi - 1`` not its own), when
 * it repeats the minute ``TimeParser.parse`` read last (``key``, its 16
 * characters as written; ``base`` its epoch; ``frac_len`` the length of
 * its fraction), read as ``TimeParser._same_minute`` reads it: ':', two
 * ASCII digits of seconds under 60, then a fraction mark ('.' or ',')
 * with exactly ``frac_len`` ASCII digits not followed by a zone or a
 * digit (``base + seconds + fraction / 10 ** frac_len``), or no mark, no
 * zone and no digit (``base + seconds + 0.0``). The floats are Python's
 * (same order of operations). Anything else is None, and the caller
 * reads the lines in Python: another minute, a line without a stamp, a
 * zone, no minute read yet (``key`` not 16 characters). A tqdm bar
 * between stamped lines is dated so, by the line just before it. */
static int
zone_or_digit(Py_UCS4 c)
{
    return c == 'Z' || c == '+' || c == '-' || (c >= '0' && c <= '9');
}

/* ``last_minute``'s reading into ``*out``: 1 where the line is read so, 0
 * where it is not (the caller reads the lines in Python). ``text`` and
 * ``key`` are str. */
static int
last_minute_at(PyObject *text, Py_ssize_t lo, Py_ssize_t hi, PyObject *key, double base, Py_ssize_t frac_len,
               double *out)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (frac_len < 0 || frac_len > 9 || !PyUnicode_IS_ASCII(key) || PyUnicode_GET_LENGTH(key) != 16 || lo < 0 ||
        hi > n || hi <= lo)
        return 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const char *k = (const char *)PyUnicode_DATA(key);
    if (!((k[0] >= '0' && k[0] <= '9') || k[0] == '{'))
        return 0; /* a stamp ``latest`` reads on (``_DATED_FIRST``) */
    Py_ssize_t end = PyUnicode_READ(kind, data, hi - 1) == '\n' ? hi - 1 : hi;
    if (end < lo)
        return 0;
    Py_ssize_t start = lo;
    for (Py_ssize_t i = end - 1; i >= lo; i--) {
        if (PyUnicode_READ(kind, data, i) == '\n') {
            start = i + 1;
            break;
        }
    }
    Py_ssize_t len = end - start;
    if (len < 19)
        return 0;
    for (Py_ssize_t i = 0; i < 16; i++) {
        if (PyUnicode_READ(kind, data, start + i) != (Py_UCS4)(unsigned char)k[i])
            return 0;
    }
    Py_UCS4 colon = PyUnicode_READ(kind, data, start + 16);
    Py_UCS4 s0 = PyUnicode_READ(kind, data, start + 17);
    Py_UCS4 s1 = PyUnicode_READ(kind, data, start + 18);
    if (colon != ':' || s0 < '0' || s0 > '5' || s1 < '0' || s1 > '9')
        return 0;
    int seconds = (int)((s0 - '0') * 10 + (s1 - '0'));
    Py_UCS4 mark = len > 19 ? PyUnicode_READ(kind, data, start + 19) : 0;
    if (mark == '.' || mark == ',') {
        if (frac_len == 0 || len < 20 + frac_len)
            return 0;
        long long frac = 0;
        for (Py_ssize_t f = 0; f < frac_len; f++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, start + 20 + f);
            if (c < '0' || c > '9')
                return 0;
            frac = frac * 10 + (long long)(c - '0');
        }
        if (len > 20 + frac_len && zone_or_digit(PyUnicode_READ(kind, data, start + 20 + frac_len)))
            return 0;
        *out = minute_value(base, seconds, frac, frac_len);
        return 1;
    }
    if (mark != 0 && zone_or_digit(mark))
        return 0;
    *out = minute_value(base, seconds, 0, 0);
    return 1;
}

static PyObject *
last_minute(PyObject *self, PyObject *args)
{
    PyObject *text, *key;
    Py_ssize_t lo, hi, frac_len;
    double base, value;
    if (!PyArg_ParseTuple(args, "UnnUdn", &text, &lo, &hi, &key, &base, &frac_len))
        return NULL;
    if (!last_minute_at(text, lo, hi, key, base, frac_len, &value))
        Py_RETURN_NONE;
    return PyFloat_FromDouble(value);
}

/* line_numbers(view, pos, number, starts) -> list[int] | None
 *
 * ``lanes.read_lanes``' line numbers of a run: each start's is the one
 * before it (``number`` at ``pos``) plus the newlines of ``view`` between
 * them, as ``accumulate(map(view.count, repeat("\n"), [pos, *starts[:-1]],
 * starts), initial=number)`` less its first. None (Python counts) for a
 * view that is not one byte a character or a negative offset. */
static PyObject *
line_numbers(PyObject *self, PyObject *args)
{
    PyObject *view, *starts;
    Py_ssize_t pos, number;
    if (!PyArg_ParseTuple(args, "UnnO!", &view, &pos, &number, &PyList_Type, &starts))
        return NULL;
    if (PyUnicode_KIND(view) != PyUnicode_1BYTE_KIND || pos < 0)
        Py_RETURN_NONE;
    const char *data = (const char *)PyUnicode_DATA(view);
    Py_ssize_t n = PyUnicode_GET_LENGTH(view);
    Py_ssize_t count = PyList_GET_SIZE(starts);
    PyObject *out = PyList_New(count);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(starts, i));
        if (start == -1 && PyErr_Occurred()) {
            Py_DECREF(out);
            return NULL;
        }
        if (start < 0) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        Py_ssize_t lo = pos < n ? pos : n, hi = start < n ? start : n;
        const char *at = data + lo, *stop = data + hi;
        while (at < stop && (at = memchr(at, '\n', (size_t)(stop - at))) != NULL) {
            number++;
            at++;
        }
        PyObject *value = PyLong_FromSsize_t(number);
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, value);
        pos = start;
    }
    return out;
}

/* The attribute names ``in_order``'s own clocks read (interned at import). */
static PyObject *n_stamp, *n_base, *n_elapsed, *n_step, *n_min_key, *n_min_val, *n_frac_len, *n_min_ym, *n_year,
    *n_month;

#define WALK_LIM (((long long)1) << 62)

/* An int value within 2**62 (two of them subtract without overflow) into
 * ``*v``, or None (``*none``); 0 for anything else (the caller's Python
 * reads it). ``step_unstamped`` and ``stall_walk`` read steps so. */
static int
small_int(PyObject *o, int *none, long long *v)
{
    if (o == Py_None) {
        *none = 1;
        *v = 0;
        return 1;
    }
    if (!PyLong_CheckExact(o))
        return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (x >= WALK_LIM || x <= -WALK_LIM)
        return 0;
    *none = 0;
    *v = x;
    return 1;
}

/* ``StepClock.unstamped(time, step, seconds)`` on ``clk`` (a
 * ``StepClock``), its four slots read and written as the method does:
 * the time in ``*out`` (a new reference) and its ``clocked`` in
 * ``*clocked``, 1; 0 with nothing changed where a value is not of the
 * kinds it reads (a float time and stamps, int steps, float or None step
 * seconds): the caller calls the method; -1 on an error. Python's float
 * operations in its order: the same values (``max(DRIFT_MIN_S, x)`` is
 * x only where x is greater). */
static int
step_unstamped(PyObject *clk, PyObject *time, PyObject *step, PyObject *seconds, double drift_min,
               double drift_share, PyObject **out, int *clocked)
{
    PyObject *stamp = NULL, *base = NULL, *elapsed = NULL, *last = NULL;
    int done = 0;
    if (!PyFloat_CheckExact(time) || (seconds != Py_None && !PyFloat_CheckExact(seconds)))
        return 0;
    long long step_v = 0, last_v = 0;
    int step_none, last_none;
    if (!small_int(step, &step_none, &step_v))
        return 0;
    stamp = PyObject_GetAttr(clk, n_stamp);
    base = stamp == NULL ? NULL : PyObject_GetAttr(clk, n_base);
    elapsed = base == NULL ? NULL : PyObject_GetAttr(clk, n_elapsed);
    last = elapsed == NULL ? NULL : PyObject_GetAttr(clk, n_step);
    if (last == NULL) {
        done = -1;
        goto out;
    }
    if ((stamp != Py_None && !PyFloat_CheckExact(stamp)) || !PyFloat_CheckExact(base) ||
        !PyFloat_CheckExact(elapsed) || !small_int(last, &last_none, &last_v))
        goto out; /* done 0: the method reads them */
    double t = PyFloat_AS_DOUBLE(time), b = PyFloat_AS_DOUBLE(base), e = PyFloat_AS_DOUBLE(elapsed);
    PyObject *new_stamp = stamp, *new_base = base, *new_last = last;
    int started = 0;
    if (stamp == Py_None) {
        started = 1;
    } else if (t != PyFloat_AS_DOUBLE(stamp)) {
        new_stamp = time;
        double ahead = t - (b + e), limit = drift_min, share = drift_share * e;
        if (share > limit)
            limit = share;
        if (ahead < 0 || ahead > limit || (!step_none && !last_none && step_v < last_v))
            started = 1;
    }
    if (started) {
        new_stamp = new_base = time;
        b = t;
        e = 0.0;
        new_last = Py_None;
        last_none = 1;
    }
    int run = !(seconds == Py_None || PyFloat_AS_DOUBLE(seconds) <= 0 || step_none);
    if (run) {
        double s = PyFloat_AS_DOUBLE(seconds);
        if (last_none || step_v > last_v) {
            /* The product rounded on its own, as Python rounds it: no fused multiply-add. */
            volatile double inc = s * (last_none ? 1.0 : (double)(step_v - last_v));
            e += inc;
        } else if (step_v < last_v) {
            e += s;
        }
        new_last = step;
    }
    PyObject *e_obj = started || run ? PyFloat_FromDouble(e) : Py_NewRef(elapsed);
    if (e_obj == NULL) {
        done = -1;
        goto out;
    }
    int failed = (new_stamp != stamp && PyObject_SetAttr(clk, n_stamp, new_stamp) < 0) ||
                 (new_base != base && PyObject_SetAttr(clk, n_base, new_base) < 0) ||
                 ((started || run) && PyObject_SetAttr(clk, n_elapsed, e_obj) < 0) ||
                 (new_last != last && PyObject_SetAttr(clk, n_step, new_last) < 0);
    Py_DECREF(e_obj);
    if (failed) {
        done = -1;
        goto out;
    }
    if (run || e != 0.0) {
        *out = PyFloat_FromDouble(b + e);
        if (*out == NULL) {
            done = -1;
            goto out;
        }
    } else {
        *out = Py_NewRef(time);
    }
    *clocked = run;
    done = 1;
out:
    Py_XDECREF(stamp);
    Py_XDECREF(base);
    Py_XDECREF(elapsed);
    Py_XDECREF(last);
    return done;
}

/* ``TimeParser.last_in_minute(text, lo, hi)`` on ``times`` (a
 * ``TimeParser``) as that method reads it: the value in ``*out`` and the
 * year and month of the minute set as it sets them, 1; 0 where it reads
 * nothing so (or its slots are not what it reads: the caller calls
 * ``latest``, which looks again); -1 on an error. */
static int
times_last_in_minute(PyObject *times, PyObject *text, Py_ssize_t lo, Py_ssize_t hi, double *out)
{
    PyObject *key = PyObject_GetAttr(times, n_min_key);
    PyObject *val = key == NULL ? NULL : PyObject_GetAttr(times, n_min_val);
    PyObject *fl = val == NULL ? NULL : PyObject_GetAttr(times, n_frac_len);
    int done = 0;
    if (fl == NULL) {
        done = -1;
        goto out;
    }
    if (!PyUnicode_CheckExact(key) || !PyFloat_CheckExact(val) || !PyLong_CheckExact(fl))
        goto out;
    Py_ssize_t frac_len = PyLong_AsSsize_t(fl);
    if (frac_len == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        goto out;
    }
    if (!last_minute_at(text, lo, hi, key, PyFloat_AS_DOUBLE(val), frac_len, out))
        goto out;
    PyObject *ym = PyObject_GetAttr(times, n_min_ym);
    if (ym == NULL) {
        done = -1;
        goto out;
    }
    if (!PyTuple_CheckExact(ym) || PyTuple_GET_SIZE(ym) != 2) {
        Py_DECREF(ym);
        goto out; /* (nothing set yet: ``latest`` reads it) */
    }
    done = PyObject_SetAttr(times, n_year, PyTuple_GET_ITEM(ym, 0)) < 0 ||
                   PyObject_SetAttr(times, n_month, PyTuple_GET_ITEM(ym, 1)) < 0
               ? -1
               : 1;
    Py_DECREF(ym);
out:
    Py_XDECREF(key);
    Py_XDECREF(val);
    Py_XDECREF(fl);
    return done;
}

/* ``EventClock.hold``'s dating of a line at ``time`` against ``*floor``
 * (``_read_in_order`` dates so where the stream's clocks let it): the time
 * it gets in ``*out`` (a new reference: ``time`` where it is at or past
 * the floor, which moves to it; else the floor), and 1, or 0 where it
 * falls more than ``jitter`` behind (its ``clocked`` then False); -1 on
 * an error. Python's comparisons and subtraction, on whatever objects. */
static int
hold_time(PyObject **floor, PyObject *time, PyObject *jitter, PyObject **out)
{
    int ge = PyObject_RichCompareBool(time, *floor, Py_GE);
    if (ge < 0)
        return -1;
    if (ge) {
        Py_INCREF(time);
        Py_SETREF(*floor, time);
        Py_INCREF(time);
        *out = time;
        return 1;
    }
    PyObject *gap = PyNumber_Subtract(*floor, time);
    int over = gap == NULL ? -1 : PyObject_RichCompareBool(gap, jitter, Py_GT);
    Py_XDECREF(gap);
    if (over < 0)
        return -1;
    Py_INCREF(*floor);
    *out = *floor;
    return !over;
}

/* Whether ``entry`` is one of ``made``'s: (stamps, events, parse, fraction
 * digits, 10 ** those, clocked, steps, step times), its events an iterator. */
static int
entry_ok(PyObject *entry)
{
    return PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 8 && PyIter_Check(PyTuple_GET_ITEM(entry, 1));
}

/* The next event of a lane's ``map`` onto ``events`` (0), or -1 with an error set. */
static int
take_event(PyObject *progress, PyObject *events)
{
    PyObject *event = PyIter_Next(progress);
    if (event == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "in_order: a lane's events ran out");
        return -1;
    }
    int failed = PyList_Append(events, event);
    Py_DECREF(event);
    return failed;
}

/* in_order(i, lanes, made, lines, starts, ends, events, state, text,
 *          fallback, latest, minute_for, minute_entered, stamped,
 *          unstamped, jitter[, clocks]) -> i
 *
 * ``lanes._read_in_order``'s loop over its common lines, from line ``i``,
 * as that loop reads them: a stamped lane line whose stamp repeats the
 * minute held (``base`` plus its seconds and fraction), and a ``Bare``
 * lane's line (a tqdm bar between stamped lines, dated by ``latest`` and,
 * where the stream's clocks date lines as they are read, run on by
 * ``unstamped``); each one's event taken from its lane's
 * ``map`` (``made[id(lane)]``: stamps, events, one-line parse (None: a
 * Bare lane), fraction digits, 10 ** those, clocked, steps, step times)
 * onto ``events``. ``state`` is the loop's list [prev, clock, covered,
 * floor, stamped, own, minute, base, entering], read and written back.
 * ``stamped`` and ``unstamped`` are None where no clock dates lines as
 * they are read (``final`` None).
 *
 * It stops before the first line it would do anything else with, with
 * nothing of that line done (a lane without its columns, a stamp of
 * another minute or not as the lane's shape says, a line not ASCII, a
 * minute held that is not (str, float)), and returns its index: the
 * Python loop reads that line, then calls it again. The callbacks are the
 * Python loop's, in its order, but for a Bare stretch of several lines,
 * read here line by line: the loop dates them all (``bare_times``), then
 * runs each on; here each is dated, then run on. ``latest`` reads the
 * time parser, ``stamped`` and ``unstamped`` the step clock: the same
 * values either way (tests/core/test_native.py counts the calls too).
 * Given ``clocks`` (the time parser, the step clock or None, DRIFT_MIN_S,
 * DRIFT_SHARE), it reads their slots itself first, as
 * ``TimeParser.last_in_minute`` and ``StepClock.unstamped`` do
 * (``times_last_in_minute``, ``step_unstamped``), and calls ``latest``
 * and ``unstamped`` only where those refuse. */
static PyObject *
in_order(PyObject *self, PyObject *args)
{
    Py_ssize_t i;
    PyObject *lanes, *made, *lines, *starts, *ends, *events, *state, *text, *fallback, *latest, *minute_for,
        *minute_entered, *stamped_cb, *unstamped, *jitter, *clocks = Py_None;
    if (!PyArg_ParseTuple(args, "nO!O!O!O!O!O!O!UOOOOOOO|O", &i, &PyList_Type, &lanes, &PyDict_Type, &made,
                          &PyList_Type, &lines, &PyList_Type, &starts, &PyList_Type, &ends, &PyList_Type, &events,
                          &PyList_Type, &state, &text, &fallback, &latest, &minute_for, &minute_entered,
                          &stamped_cb, &unstamped, &jitter, &clocks))
        return NULL;
    /* ``clocks``: None, or (the time parser, the step clock or None, DRIFT_MIN_S,
     * DRIFT_SHARE), whose methods behind ``latest`` and ``unstamped`` are read here. */
    PyObject *times_obj = NULL, *steps_obj = NULL;
    double drift_min = 0.0, drift_share = 0.0;
    if (clocks != Py_None) {
        if (!PyTuple_Check(clocks) || PyTuple_GET_SIZE(clocks) != 4) {
            PyErr_SetString(PyExc_TypeError, "in_order: clocks is (times, steps, drift_min, drift_share) or None");
            return NULL;
        }
        times_obj = PyTuple_GET_ITEM(clocks, 0);
        steps_obj = PyTuple_GET_ITEM(clocks, 1) == Py_None ? NULL : PyTuple_GET_ITEM(clocks, 1);
        drift_min = PyFloat_AsDouble(PyTuple_GET_ITEM(clocks, 2));
        drift_share = PyFloat_AsDouble(PyTuple_GET_ITEM(clocks, 3));
        if (PyErr_Occurred())
            return NULL;
    }
    if (PyList_GET_SIZE(state) != 9) {
        PyErr_SetString(PyExc_ValueError, "in_order: the state holds 9 items");
        return NULL;
    }
    Py_ssize_t total = PyList_GET_SIZE(lanes);
    if (PyList_GET_SIZE(lines) != total || PyList_GET_SIZE(starts) != total || PyList_GET_SIZE(ends) != total) {
        PyErr_SetString(PyExc_ValueError, "in_order: the run's lists differ in length");
        return NULL;
    }
    int final = unstamped != Py_None;
    PyObject *tmp;
    PyObject *prev = Py_NewRef(PyList_GET_ITEM(state, 0)), *clock = Py_NewRef(PyList_GET_ITEM(state, 1));
    PyObject *floor = Py_NewRef(PyList_GET_ITEM(state, 3)), *minute = Py_NewRef(PyList_GET_ITEM(state, 6));
    PyObject *base_obj = Py_NewRef(PyList_GET_ITEM(state, 7));
    PyObject *result = NULL;
    PyObject *entry = NULL; /* the entry of the lane read last (borrowed from ``made``; NULL: none) */
    int stamped = 0, entering = 0;
    Py_ssize_t own = 0;
    Py_ssize_t covered = PyLong_AsSsize_t(PyList_GET_ITEM(state, 2));
    if (covered == -1 && PyErr_Occurred())
        goto done;
    own = PyLong_AsSsize_t(PyList_GET_ITEM(state, 5));
    if (own == -1 && PyErr_Occurred())
        goto done;
    stamped = PyObject_IsTrue(PyList_GET_ITEM(state, 4));
    entering = PyObject_IsTrue(PyList_GET_ITEM(state, 8));
    if (stamped < 0 || entering < 0)
        goto done;
    if (i < 0 || i > total) {
        PyErr_SetString(PyExc_IndexError, "in_order: the line is not in the run");
        goto done;
    }
    {
        PyObject *key = PyLong_FromVoidPtr(prev);
        if (key == NULL)
            goto done;
        entry = PyDict_GetItemWithError(made, key);
        Py_DECREF(key);
        if (entry == NULL && PyErr_Occurred())
            goto done;
        if (entry != NULL && !entry_ok(entry))
            entry = NULL; /* (the Python loop reads its lines) */
    }
    while (i < total) {
        PyObject *lane = PyList_GET_ITEM(lanes, i);
        PyObject *bare_entry = NULL; /* the line's Bare lane's entry, if it is one */
        PyObject *found = NULL;      /* the line's lane's entry, where the lane changes */
        if (lane != prev) {
            PyObject *key = PyLong_FromVoidPtr(lane);
            if (key == NULL)
                goto done;
            found = PyDict_GetItemWithError(made, key);
            Py_DECREF(key);
            if (found == NULL) {
                if (PyErr_Occurred())
                    goto done;
                break; /* no columns: read on its own */
            }
            if (!entry_ok(found))
                break;
            if (PyTuple_GET_ITEM(found, 2) == Py_None)
                bare_entry = found;
        } else if (entry == NULL) {
            break;
        } else if (PyTuple_GET_ITEM(entry, 2) == Py_None) {
            bare_entry = entry;
        }
        if (bare_entry != NULL) {
            PyObject *stamps = PyTuple_GET_ITEM(bare_entry, 0), *progress = PyTuple_GET_ITEM(bare_entry, 1);
            PyObject *clocked = PyTuple_GET_ITEM(bare_entry, 5);
            PyObject *lane_steps = PyTuple_GET_ITEM(bare_entry, 6), *lane_seconds = PyTuple_GET_ITEM(bare_entry, 7);
            if (!PyList_Check(stamps) || !PyList_Check(clocked) ||
                (final && (!PyList_Check(lane_steps) || !PyList_Check(lane_seconds))))
                break;
            Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(starts, i));
            Py_ssize_t line_end = PyLong_AsSsize_t(PyList_GET_ITEM(ends, i));
            if (PyErr_Occurred())
                goto done;
            /* From here on the line is read: nothing breaks off. */
            Py_INCREF(lane);
            Py_SETREF(prev, lane);
            entry = bare_entry;
            if (covered <= start) {
                if (covered < start) {
                    PyObject *value = NULL;
                    double seen;
                    int got = times_obj == NULL ? 0 : times_last_in_minute(times_obj, text, covered, start, &seen);
                    if (got > 0) {
                        value = PyFloat_FromDouble(seen);
                    } else if (got == 0) {
                        PyObject *lo = PyLong_FromSsize_t(covered), *hi = PyLong_FromSsize_t(start);
                        if (lo != NULL && hi != NULL) {
                            PyObject *call[3] = {text, lo, hi};
                            value = PyObject_Vectorcall(latest, call, 3, NULL);
                        }
                        Py_XDECREF(lo);
                        Py_XDECREF(hi);
                    }
                    if (value == NULL)
                        goto done;
                    if (value != Py_None)
                        Py_SETREF(clock, value);
                    else
                        Py_DECREF(value);
                }
                covered = line_end + 1;
            }
            PyObject *bare = clock == Py_None ? fallback : clock;
            if (!final) {
                if (PyList_Append(stamps, bare) < 0)
                    goto done;
            } else {
                if (stamped) {
                    tmp = PyObject_CallNoArgs(stamped_cb);
                    if (tmp == NULL)
                        goto done;
                    Py_DECREF(tmp);
                    stamped = 0;
                }
                Py_ssize_t k = PyList_GET_SIZE(stamps);
                if (k >= PyList_GET_SIZE(lane_steps) || k >= PyList_GET_SIZE(lane_seconds)) {
                    PyErr_SetString(PyExc_IndexError, "in_order: a Bare lane's steps ran out");
                    goto done;
                }
                PyObject *call[3] = {bare, PyList_GET_ITEM(lane_steps, k), PyList_GET_ITEM(lane_seconds, k)};
                PyObject *time = NULL, *was = NULL;
                int run_on = 0;
                /* (the step and its time held: the clock's slots are set in between) */
                Py_INCREF(call[0]);
                Py_INCREF(call[1]);
                Py_INCREF(call[2]);
                int ran = steps_obj == NULL ? 0
                                            : step_unstamped(steps_obj, call[0], call[1], call[2], drift_min,
                                                             drift_share, &time, &run_on);
                if (ran > 0) {
                    was = Py_NewRef(run_on ? Py_True : Py_False);
                } else if (ran == 0) {
                    PyObject *got = PyObject_Vectorcall(unstamped, call, 3, NULL);
                    if (got != NULL && (!PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2)) {
                        Py_CLEAR(got);
                        PyErr_SetString(PyExc_TypeError, "in_order: unstamped gives (time, clocked)");
                    }
                    if (got != NULL) {
                        time = Py_NewRef(PyTuple_GET_ITEM(got, 0));
                        was = Py_NewRef(PyTuple_GET_ITEM(got, 1));
                        Py_DECREF(got);
                    }
                }
                Py_DECREF(call[0]);
                Py_DECREF(call[1]);
                Py_DECREF(call[2]);
                if (time == NULL)
                    goto done;
                PyObject *held;
                int kept = hold_time(&floor, time, jitter, &held);
                Py_DECREF(time);
                if (kept < 0) {
                    Py_DECREF(was);
                    goto done;
                }
                int failed = PyList_Append(stamps, held) < 0 || PyList_Append(clocked, kept ? was : Py_False) < 0;
                Py_DECREF(held);
                Py_DECREF(was);
                if (failed)
                    goto done;
            }
            if (take_event(progress, events) < 0)
                goto done;
            i++;
            continue;
        }
        if (found != NULL) {
            /* A stamped lane: the minute held, if a line may add seconds to it. */
            /* (``lane`` and ``found`` held across the call: it runs Python.) */
            Py_INCREF(lane);
            Py_INCREF(found);
            PyObject *held = PyObject_CallOneArg(minute_for, PyTuple_GET_ITEM(found, 3));
            Py_DECREF(found);
            Py_DECREF(lane);
            if (held == NULL)
                goto done;
            if (held == Py_None) {
                Py_DECREF(held);
                Py_INCREF(Py_None);
                Py_SETREF(minute, Py_None);
                tmp = PyFloat_FromDouble(0.0);
                if (tmp == NULL)
                    goto done;
                Py_SETREF(base_obj, tmp);
                entering = 0;
            } else {
                if (!PyTuple_Check(held) || PyTuple_GET_SIZE(held) != 2 ||
                    !PyUnicode_Check(PyTuple_GET_ITEM(held, 0)) || !PyFloat_CheckExact(PyTuple_GET_ITEM(held, 1))) {
                    Py_DECREF(held);
                    break; /* (nothing changed yet: Python asks again) */
                }
                tmp = PyTuple_GET_ITEM(held, 0);
                Py_INCREF(tmp);
                Py_SETREF(minute, tmp);
                tmp = PyTuple_GET_ITEM(held, 1);
                Py_INCREF(tmp);
                Py_SETREF(base_obj, tmp);
                Py_DECREF(held);
                entering = 1;
            }
            Py_INCREF(lane);
            Py_SETREF(prev, lane);
            entry = found;
        }
        /* A stamped line, its stamp read as ``_minute_run`` reads it. */
        PyObject *stamps = PyTuple_GET_ITEM(entry, 0), *progress = PyTuple_GET_ITEM(entry, 1);
        PyObject *clocked = PyTuple_GET_ITEM(entry, 5);
        Py_ssize_t frac_len = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 3));
        if (frac_len == -1 && PyErr_Occurred())
            goto done;
        PyObject *line = PyList_GET_ITEM(lines, i);
        Py_ssize_t need = frac_len ? 20 + frac_len : 19;
        if (frac_len < 0 || frac_len > 9 || !PyList_Check(stamps) || !PyList_Check(clocked) || minute == Py_None ||
            !PyUnicode_Check(minute) || !PyUnicode_IS_ASCII(minute) || PyUnicode_GET_LENGTH(minute) != 16 ||
            !PyFloat_CheckExact(base_obj) || !PyUnicode_Check(line) || PyUnicode_GET_LENGTH(line) < need)
            break;
        /* The stamp's characters (a line may hold others past it: a bar's blocks). */
        char head[32];
        const char *c = head;
        if (PyUnicode_IS_ASCII(line)) {
            c = (const char *)PyUnicode_DATA(line);
        } else {
            int kind = PyUnicode_KIND(line);
            const void *data = PyUnicode_DATA(line);
            Py_ssize_t at = 0;
            for (; at < need; at++) {
                Py_UCS4 ch = PyUnicode_READ(kind, data, at);
                if (ch > 127)
                    break;
                head[at] = (char)ch;
            }
            if (at < need)
                break; /* not ASCII within the stamp: Python reads it */
        }
        if (memcmp(c, PyUnicode_DATA(minute), 16) != 0 || c[17] < '0' || c[17] > '5' || c[18] < '0' || c[18] > '9')
            break; /* another minute (or not a second under 60): Python parses it */
        long long frac = 0;
        Py_ssize_t f = 20;
        for (; f < 20 + frac_len && c[f] >= '0' && c[f] <= '9'; f++)
            frac = frac * 10 + (c[f] - '0');
        if (frac_len && f < 20 + frac_len)
            break;
        Py_ssize_t line_end = PyLong_AsSsize_t(PyList_GET_ITEM(ends, i));
        if (line_end == -1 && PyErr_Occurred())
            goto done;
        PyObject *stamp =
            PyFloat_FromDouble(minute_value(PyFloat_AS_DOUBLE(base_obj), (c[17] - '0') * 10 + (c[18] - '0'), frac, frac_len));
        if (stamp == NULL)
            goto done;
        if (entering) {
            tmp = PyObject_CallNoArgs(minute_entered);
            if (tmp == NULL) {
                Py_DECREF(stamp);
                goto done;
            }
            Py_DECREF(tmp);
            entering = 0;
        }
        own++;
        Py_INCREF(stamp);
        Py_SETREF(clock, stamp);
        covered = line_end + 1;
        int failed = 0;
        if (!final) {
            failed = PyList_Append(stamps, stamp) < 0;
        } else {
            PyObject *held;
            int kept = hold_time(&floor, stamp, jitter, &held);
            if (kept < 0) {
                failed = 1;
            } else {
                failed = PyList_Append(stamps, held) < 0 || PyList_Append(clocked, kept ? Py_True : Py_False) < 0;
                Py_DECREF(held);
            }
            stamped = 1;
        }
        Py_DECREF(stamp);
        if (failed)
            goto done;
        if (take_event(progress, events) < 0)
            goto done;
        i++;
    }
    result = PyLong_FromSsize_t(i);
done:
    /* The loop's state back into ``state`` (on an error too: nothing reads it then). */
    PyList_SetItem(state, 0, prev);
    PyList_SetItem(state, 1, clock);
    PyList_SetItem(state, 3, floor);
    PyList_SetItem(state, 4, PyBool_FromLong(stamped));
    PyList_SetItem(state, 6, minute);
    PyList_SetItem(state, 7, base_obj);
    PyList_SetItem(state, 8, PyBool_FromLong(entering));
    PyObject *covered_obj = PyLong_FromSsize_t(covered), *own_obj = PyLong_FromSsize_t(own);
    if (covered_obj == NULL || own_obj == NULL) {
        Py_XDECREF(covered_obj);
        Py_XDECREF(own_obj);
        Py_XDECREF(result);
        return NULL;
    }
    PyList_SetItem(state, 2, covered_obj);
    PyList_SetItem(state, 5, own_obj);
    return result;
}

/* rank_numbers(lines, i, prefixes) -> list[int] | None
 *
 * ``lanes._read_by_stretch``'s ranks of a stretch of ranked lines: for
 * each of ``prefixes`` (``Ranked`` tuples: lane, cut, rank_at, rank_end)
 * and ``lines[i + k]``, ``int(line[rank_at:rank_end])``, where that is 1
 * to 18 ASCII digits (``ranks.rank_span`` cuts them so); None where any
 * is not (Python reads them, with ``int``'s own rules). */
static PyObject *
rank_numbers(PyObject *self, PyObject *args)
{
    PyObject *lines, *prefixes;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "O!nO!", &PyList_Type, &lines, &i, &PyList_Type, &prefixes))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(prefixes);
    if (i < 0 || i + count > PyList_GET_SIZE(lines))
        Py_RETURN_NONE;
    PyObject *out = PyList_New(count);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *p = PyList_GET_ITEM(prefixes, k), *line = PyList_GET_ITEM(lines, i + k);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 4 || !PyUnicode_Check(line))
            goto python;
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(p, 2)), end = PyLong_AsSsize_t(PyTuple_GET_ITEM(p, 3));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto python;
        }
        if (at < 0 || end > PyUnicode_GET_LENGTH(line) || end - at < 1 || end - at > 18)
            goto python;
        int kind = PyUnicode_KIND(line);
        const void *data = PyUnicode_DATA(line);
        long long value = 0;
        for (Py_ssize_t c = at; c < end; c++) {
            Py_UCS4 ch = PyUnicode_READ(kind, data, c);
            if (ch < '0' || ch > '9')
                goto python;
            value = value * 10 + (long long)(ch - '0');
        }
        PyObject *number = PyLong_FromLongLong(value);
        if (number == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, number);
    }
    return out;
python:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/* A ``Progress`` built field by field, as ``events.new_progress`` builds
 * one (``set_progress`` tells the class, its fields' slot descriptors in
 * order, their defaults and how many are required, once).
 *
 * ``build_progress(*args, **kwargs)`` takes ``Progress``'s arguments
 * (positional, keywords, defaults; a missing, unknown or doubled one is a
 * TypeError) and stores each through its slot's descriptor, as
 * ``object.__setattr__`` does for a frozen dataclass: the object is a
 * ``Progress`` in every way (tests/core/test_parse_speed_shortcuts.py).
 * In C the interpreter's frame and its 13 stores go: one event costs
 * half the Python builder's time, and the stream builds one per
 * progress line. */
static PyTypeObject *progress_type = NULL;
static PyObject *progress_names = NULL;    /* tuple of str, the fields in order */
static PyObject *progress_descrs = NULL;   /* tuple, each field's slot descriptor */
static PyObject *progress_defaults = NULL; /* tuple, each field's default (None where required) */
static Py_ssize_t progress_required = 0;
/* Each field's offset in the object, where every descriptor is a plain
 * writable object slot of the class (a member descriptor of type
 * T_OBJECT_EX, its own class's): then a field is stored into the new
 * object's slot directly, as that descriptor's setter would store it in an
 * empty slot, without a call per field. -1 at [0]: through the descriptors. */
static Py_ssize_t progress_offsets[32] = {-1};
/* ``stream_tails``' offsets of source, step and time, found at its first
 * call after each ``set_progress`` (which resets them: another class). */
static Py_ssize_t tails_where[3] = {-1, -1, -1};

static int
plain_slot(PyObject *d, PyTypeObject *cls, Py_ssize_t *offset)
{
    if (Py_TYPE(d) != &PyMemberDescr_Type)
        return 0;
    PyMemberDescrObject *m = (PyMemberDescrObject *)d;
    PyMemberDef *def = m->d_member;
    if (m->d_common.d_type != cls || def->type != T_OBJECT_EX || def->flags != 0 || def->offset <= 0 ||
        (size_t)def->offset + sizeof(PyObject *) > (size_t)cls->tp_basicsize)
        return 0;
    *offset = def->offset;
    return 1;
}

static PyObject *
set_progress(PyObject *self, PyObject *args)
{
    PyObject *cls, *names, *descrs, *defaults;
    Py_ssize_t required;
    if (!PyArg_ParseTuple(args, "O!O!O!O!n", &PyType_Type, &cls, &PyTuple_Type, &names, &PyTuple_Type, &descrs,
                          &PyTuple_Type, &defaults, &required))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (PyTuple_GET_SIZE(descrs) != n || PyTuple_GET_SIZE(defaults) != n || required < 0 || required > n) {
        PyErr_SetString(PyExc_ValueError, "set_progress: names, descriptors and defaults differ in length");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyTuple_GET_ITEM(descrs, i);
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i)) || Py_TYPE(d)->tp_descr_set == NULL) {
            PyErr_SetString(PyExc_TypeError, "set_progress: a field without a slot descriptor");
            return NULL;
        }
    }
    Py_ssize_t offsets[32];
    int direct = n <= 32 && ((PyTypeObject *)cls)->tp_itemsize == 0;
    for (Py_ssize_t i = 0; direct && i < n; i++)
        direct = plain_slot(PyTuple_GET_ITEM(descrs, i), (PyTypeObject *)cls, &offsets[i]);
    if (direct)
        memcpy(progress_offsets, offsets, sizeof(Py_ssize_t) * (size_t)n);
    else
        progress_offsets[0] = -1;
    Py_INCREF(cls);
    Py_INCREF(names);
    Py_INCREF(descrs);
    Py_INCREF(defaults);
    Py_XSETREF(progress_type, (PyTypeObject *)cls);
    Py_XSETREF(progress_names, names);
    Py_XSETREF(progress_descrs, descrs);
    Py_XSETREF(progress_defaults, defaults);
    progress_required = required;
    tails_where[0] = tails_where[1] = tails_where[2] = -1;
    Py_RETURN_NONE;
}

static PyObject *
build_progress(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (progress_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "build_progress: set_progress was not called");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(progress_names);
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "Progress takes at most %zd arguments (%zd given)", n, nargs);
        return NULL;
    }
    PyObject *values[32];
    if (n > 32) {
        PyErr_SetString(PyExc_TypeError, "build_progress: too many fields");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        values[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t at = -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *name = PyTuple_GET_ITEM(progress_names, i);
            if (name == key) {
                at = i;
                break;
            }
        }
        if (at < 0) {
            for (Py_ssize_t i = 0; i < n; i++) {
                int same = PyUnicode_Compare(PyTuple_GET_ITEM(progress_names, i), key);
                if (same == -1 && PyErr_Occurred())
                    return NULL;
                if (same == 0) {
                    at = i;
                    break;
                }
            }
        }
        if (at < 0) {
            PyErr_Format(PyExc_TypeError, "Progress got an unexpected keyword argument '%U'", key);
            return NULL;
        }
        if (values[at] != NULL) {
            PyErr_Format(PyExc_TypeError, "Progress got multiple values for argument '%U'", key);
            return NULL;
        }
        values[at] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (values[i] == NULL) {
            if (i < progress_required) {
                PyErr_Format(PyExc_TypeError, "Progress missing required argument: '%U'",
                             PyTuple_GET_ITEM(progress_names, i));
                return NULL;
            }
            values[i] = PyTuple_GET_ITEM(progress_defaults, i);
        }
    }
    PyObject *obj = progress_type->tp_alloc(progress_type, 0);
    if (obj == NULL)
        return NULL;
    if (n > 0 && progress_offsets[0] > 0) {
        /* tp_alloc zeroed the slots: each is stored once, as the setter would. */
        for (Py_ssize_t i = 0; i < n; i++)
            *(PyObject **)((char *)obj + progress_offsets[i]) = Py_NewRef(values[i]);
        return obj;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyTuple_GET_ITEM(progress_descrs, i);
        if (Py_TYPE(d)->tp_descr_set(d, obj, values[i]) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    }
    return obj;
}

/* The offsets of the fields ``which`` names (their places among
 * ``Progress``'s fields, a tuple of at most ``most`` ints) into ``out``:
 * their count, or -1 with an error set (``who`` names the caller). */
static Py_ssize_t
field_offsets(PyObject *which, Py_ssize_t *out, Py_ssize_t most, const char *who)
{
    Py_ssize_t fields = PyTuple_GET_SIZE(progress_names), k = PyTuple_GET_SIZE(which);
    if (k > most) {
        PyErr_Format(PyExc_ValueError, "%s: at most %zd fields", who, most);
        return -1;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(which, j));
        if (at == -1 && PyErr_Occurred())
            return -1;
        if (at < 0 || at >= fields) {
            PyErr_Format(PyExc_IndexError, "%s: no such field", who);
            return -1;
        }
        out[j] = progress_offsets[at];
    }
    return k;
}

/* The items of ``list`` held in a C array of new references (``*n`` of
 * them; NULL with MemoryError set). Taken with no allocation that could
 * run the collector, so a callback of it cannot change the list halfway
 * (as it can ``list[:]``'s copy); the caller reads the array, never the
 * list again, and gives it back with ``release_items``. */
static PyObject **
hold_items(PyObject *list, Py_ssize_t *n)
{
    Py_ssize_t size = PyList_GET_SIZE(list);
    PyObject **held = PyMem_Malloc(sizeof(PyObject *) * (size_t)(size > 0 ? size : 1));
    if (held == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < size; i++)
        held[i] = Py_NewRef(PyList_GET_ITEM(list, i));
    *n = size;
    return held;
}

static void
release_items(PyObject **held, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        Py_DECREF(held[i]);
    PyMem_Free(held);
}

/* stall_walk(steps, fields, bound, floor, dup_s, watching, last_step,
 *            last_t, last_total, rank0, step_seconds, bars)
 *     -> tuple | None | NotImplemented
 *
 * ``stall.walk_steps`` in C, the same loop over the same values: each
 * line's time, step, clocked, rank, step seconds and total (``fields``:
 * their places among ``Progress``'s fields) read at their slots. It walks
 * only where every value is of the kind the loop compares (times and step
 * seconds floats; steps, totals and ranks ints within 2**62, or None;
 * clocked a bool; ``last_t`` a float or None; ``bars`` an int), else it
 * gives NotImplemented and Python walks. None: a line comes after its
 * deadline. Else ``walk_steps``' tuple. */
static PyObject *
stall_walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12 || !PyList_Check(args[0]) || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != 6) {
        PyErr_SetString(PyExc_TypeError, "stall_walk: steps, fields and ten values");
        return NULL;
    }
    if (progress_type == NULL || progress_offsets[0] <= 0)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *steps = args[0];
    Py_ssize_t off[6];
    if (field_offsets(args[1], off, 6, "stall_walk") < 0)
        return NULL;
    if (!PyFloat_CheckExact(args[2]) || !PyFloat_CheckExact(args[3]) || !PyFloat_CheckExact(args[4]) ||
        !PyBool_Check(args[5]) || !(args[7] == Py_None || PyFloat_CheckExact(args[7])) ||
        !PyLong_CheckExact(args[11]))
        Py_RETURN_NOTIMPLEMENTED;
    double bound = PyFloat_AS_DOUBLE(args[2]), floor = PyFloat_AS_DOUBLE(args[3]), dup_s = PyFloat_AS_DOUBLE(args[4]);
    int watching = args[5] == Py_True;
    int ls_none, lt_none = args[7] == Py_None, tot_none, r0_none;
    long long last_step, last_total, rank0;
    double last_t = lt_none ? 0.0 : PyFloat_AS_DOUBLE(args[7]);
    if (!small_int(args[6], &ls_none, &last_step) || !small_int(args[8], &tot_none, &last_total) ||
        !small_int(args[9], &r0_none, &rank0))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *last_step_obj = args[6], *last_total_obj = args[8], *rank0_obj = args[9];
    PyObject *step_seconds = args[10]; /* passed on, never compared */
    int overflow = 0;
    long long bars = PyLong_AsLongLongAndOverflow(args[11], &overflow);
    if (overflow || bars < 0 || bars >= WALK_LIM) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* The list's items held (the caller's list may change while anything
     * runs), then no allocation that can run the collector until every
     * object kept is held: the gaps go to a C buffer first. */
    Py_ssize_t n;
    PyObject **own = hold_items(steps, &n);
    if (own == NULL)
        return NULL;
    /* Every value first: the walk then never leaves halfway to Python. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = own[i];
        if (Py_TYPE(p) != progress_type) {
            release_items(own, n);
            Py_RETURN_NOTIMPLEMENTED;
        }
        PyObject *t = *(PyObject **)((char *)p + off[0]), *st = *(PyObject **)((char *)p + off[1]);
        PyObject *clk = *(PyObject **)((char *)p + off[2]), *rk = *(PyObject **)((char *)p + off[3]);
        PyObject *secs = *(PyObject **)((char *)p + off[4]), *tot = *(PyObject **)((char *)p + off[5]);
        int none;
        long long v;
        if (t == NULL || st == NULL || clk == NULL || rk == NULL || secs == NULL || tot == NULL ||
            !PyFloat_CheckExact(t) || !PyBool_Check(clk) || !(secs == Py_None || PyFloat_CheckExact(secs)) ||
            !small_int(st, &none, &v) || !small_int(rk, &none, &v) || !small_int(tot, &none, &v)) {
            release_items(own, n);
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    double *gaps = PyMem_Malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)); /* (never runs the collector) */
    if (gaps == NULL) {
        release_items(own, n);
        return PyErr_NoMemory();
    }
    Py_ssize_t ngaps = 0;
    PyObject *taken = Py_None;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = own[i];
        double t = PyFloat_AS_DOUBLE(*(PyObject **)((char *)p + off[0]));
        if (i > 0 && !(t <= bound)) {
            PyMem_Free(gaps);
            release_items(own, n);
            Py_RETURN_NONE;
        }
        PyObject *step_obj = *(PyObject **)((char *)p + off[1]);
        int s_none;
        long long step;
        small_int(step_obj, &s_none, &step);
        if (*(PyObject **)((char *)p + off[2]) != Py_True) {
            last_step_obj = step_obj;
            ls_none = s_none;
            last_step = step;
            watching = 0;
            bound = Py_HUGE_VAL;
            continue;
        }
        if (s_none) {
            PyObject *rank_obj = *(PyObject **)((char *)p + off[3]);
            int rk_none;
            long long rank;
            small_int(rank_obj, &rk_none, &rank);
            if (!rk_none) {
                if (r0_none || rank < rank0) {
                    rank0_obj = rank_obj;
                    r0_none = 0;
                    rank0 = rank;
                } else if (rank != rank0) {
                    continue;
                }
            }
        } else if (!ls_none && watching) {
            if (step == last_step)
                continue;
            if (step < last_step && !lt_none && t - last_t <= dup_s &&
                !(!tot_none && last_total != 0 && last_step + 1 >= last_total))
                continue;
        }
        PyObject *secs = *(PyObject **)((char *)p + off[4]);
        if (secs != Py_None && PyFloat_AS_DOUBLE(secs) > 0)
            step_seconds = secs;
        if (!lt_none && watching && t > last_t)
            gaps[ngaps++] = t - last_t;
        PyObject *total_obj = *(PyObject **)((char *)p + off[5]);
        int t_none;
        long long total;
        small_int(total_obj, &t_none, &total);
        if (!tot_none && last_total != 0 && !ls_none && last_step + 1 >= last_total && !s_none &&
            (step < last_step || t_none || total != last_total))
            bars++;
        last_t = t;
        lt_none = 0;
        last_step_obj = step_obj;
        ls_none = s_none;
        last_step = step;
        last_total_obj = total_obj;
        tot_none = t_none;
        last_total = total;
        taken = p;
        watching = !(!t_none && total != 0 && !s_none && step + 1 >= total && bars == 0);
        bound = watching ? t + floor : Py_HUGE_VAL;
    }
    /* ``last_t``: the time of the line taken last (the same float), else the one given. */
    PyObject *last_t_obj = taken != Py_None ? *(PyObject **)((char *)taken + off[0]) : args[7];
    PyObject *kept[6] = {taken, last_step_obj, last_t_obj, last_total_obj, rank0_obj, step_seconds};
    for (int j = 0; j < 6; j++)
        Py_INCREF(kept[j]); /* held: the allocations below may run anything */
    PyObject *intervals = PyList_New(ngaps);
    for (Py_ssize_t j = 0; intervals != NULL && j < ngaps; j++) {
        PyObject *gap = PyFloat_FromDouble(gaps[j]);
        if (gap == NULL)
            Py_CLEAR(intervals);
        else
            PyList_SET_ITEM(intervals, j, gap);
    }
    PyMem_Free(gaps);
    release_items(own, n);
    PyObject *result = NULL;
    if (intervals != NULL)
        result = Py_BuildValue("(OOOOOOOLO)", intervals, kept[0], kept[1], kept[2], kept[3], kept[4], kept[5], bars,
                               watching ? Py_True : Py_False);
    Py_XDECREF(intervals);
    for (int j = 0; j < 6; j++)
        Py_DECREF(kept[j]);
    return result;
}

/* set_rank_state(cls, names) -> None
 * rank_steps(ranks, steps, fields, window_s, new_rank, rank_of_source)
 *     -> (index, stepped, advanced)
 *
 * ``straggler_ranks.take_log_steps``' loop in C: step lines without
 * figures, in order, into each rank's ``RankState`` as the Python loop
 * takes them (the same comparisons, calls and stores, in its order).
 * ``set_rank_state`` is told the class and the names of the fields the
 * loop reads and writes (``RANK_FIELDS`` below, in that order); each must
 * be a plain object slot of it, else the kernel takes nothing. ``fields``:
 * the places of a line's rank, time, source, step and clocked among
 * ``Progress``'s fields. The rank state's own methods (``_interval``,
 * ``_prune``), ``new_rank`` and ``rank_of_source`` are called as Python
 * calls them. It stops before the first line it cannot take whole (not
 * exactly a ``Progress``, a state not exactly of the class, an empty
 * slot, ``measured`` or ``series`` not exactly a dict) and returns where,
 * with what it found so far: Python reads the rest. */
enum { RS_LAST_SEEN, RS_SOURCE, RS_LAST_STEP, RS_LAST_STEP_TIME, RS_HEARTBEAT, RS_TIMED_OUT, RS_MEASURED, RS_SERIES,
       RS_INTERVALS, RS_SECONDS, RS_STEPS, RS_USUAL_S, RS_USUAL_N, RS_FIELDS };
/* What ``set_rank_state`` was told: the class, each field's slot (its
 * descriptor, to check at each call that the class still has it, and its
 * offset), and for ``_interval``'s full window the deque class of
 * ``intervals``, its length when full, ``straggler_ranks._slid`` (a
 * sorted window slid in Python, where ``window_swap`` declines) and the
 * class's own ``_interval`` (inlined only while the class has it: a test
 * or a subclass that replaces it is called instead). ``rank_steps`` works
 * on a copy it holds for the whole call: a call may register another. */
typedef struct {
    PyTypeObject *cls, *deque;
    PyObject *names, *descrs, *slid, *interval_fn;
    Py_ssize_t off[RS_FIELDS];
    Py_ssize_t kept;
} RankCfg;
static RankCfg rank_reg = {NULL};

static void
rank_cfg_release(RankCfg *cfg)
{
    Py_CLEAR(cfg->cls);
    Py_CLEAR(cfg->deque);
    Py_CLEAR(cfg->names);
    Py_CLEAR(cfg->descrs);
    Py_CLEAR(cfg->slid);
    Py_CLEAR(cfg->interval_fn);
}

static void
rank_cfg_hold(RankCfg *to, const RankCfg *from)
{
    *to = *from;
    Py_XINCREF(to->cls);
    Py_XINCREF(to->deque);
    Py_XINCREF(to->names);
    Py_XINCREF(to->descrs);
    Py_XINCREF(to->slid);
    Py_XINCREF(to->interval_fn);
}

static PyObject *
set_rank_state(PyObject *self, PyObject *args)
{
    PyObject *cls, *names, *deque_type, *slid, *interval;
    Py_ssize_t kept;
    if (!PyArg_ParseTuple(args, "O!O!O!nOO", &PyType_Type, &cls, &PyTuple_Type, &names, &PyType_Type, &deque_type,
                          &kept, &slid, &interval))
        return NULL;
    if (kept < 2 || kept % 2 || !PyCallable_Check(slid)) {
        PyErr_SetString(PyExc_ValueError, "set_rank_state: an even window of two or more, a callable slide");
        return NULL;
    }
    if (PyTuple_GET_SIZE(names) != RS_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "set_rank_state: the fields named in the kernel's order");
        return NULL;
    }
    RankCfg cfg = {NULL};
    int direct = ((PyTypeObject *)cls)->tp_itemsize == 0;
    PyObject *descrs = PyTuple_New(RS_FIELDS);
    if (descrs == NULL)
        return NULL;
    for (Py_ssize_t i = 0; direct && i < RS_FIELDS; i++) {
        PyObject *d = PyObject_GetAttr(cls, PyTuple_GET_ITEM(names, i));
        if (d == NULL) {
            PyErr_Clear();
            direct = 0;
            break;
        }
        direct = plain_slot(d, (PyTypeObject *)cls, &cfg.off[i]);
        PyTuple_SET_ITEM(descrs, i, d);
    }
    rank_cfg_release(&rank_reg);
    if (direct) {
        cfg.cls = (PyTypeObject *)cls;
        cfg.deque = (PyTypeObject *)deque_type;
        cfg.names = names;
        cfg.descrs = descrs;
        cfg.slid = slid;
        cfg.interval_fn = interval;
        cfg.kept = kept;
        rank_cfg_hold(&rank_reg, &cfg);
    }
    Py_DECREF(descrs);
    Py_RETURN_NONE;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* Stores ``value`` in a slot (a new reference; the old one let go after). */
static void
set_slot(PyObject *obj, Py_ssize_t off, PyObject *value)
{
    PyObject *old = SLOT(obj, off);
    SLOT(obj, off) = Py_NewRef(value);
    Py_XDECREF(old);
}

static PyObject *rs_log_key, *rs_interval_name, *rs_prune_name, *rs_append_name, *rs_series_names[3];
static PyObject *window_swap(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* The sorted window ``values`` slid (``old`` out, ``new`` in) and its
 * median: ``window_swap``, else ``straggler_ranks._slid`` in Python. A new
 * reference, NULL on an error. */
static PyObject *
slid_median(const RankCfg *cfg, PyObject *values, PyObject *old, PyObject *new)
{
    PyObject *argv[3] = {values, old, new};
    PyObject *median = window_swap(NULL, argv, 3);
    if (median != Py_None)
        return median;
    Py_DECREF(median);
    return PyObject_Vectorcall(cfg->slid, argv, 3, NULL);
}

/* ``RankState._interval`` of a full window (its common case), as the
 * method does it: the oldest interval leaves as the new one comes, and
 * each sorted list slides where the value leaving is not the one coming.
 * 0 (nothing done: the method is called) where ``intervals`` is not
 * exactly a deque, not full, its oldest not a pair, or a list not exactly
 * a list; 1 done; -1 an error. */
static int
rank_interval(const RankCfg *cfg, PyObject *state, PyObject *seconds, PyObject *steps)
{
    PyObject *intervals = SLOT(state, cfg->off[RS_INTERVALS]);
    if (intervals == NULL || Py_TYPE(intervals) != cfg->deque || Py_SIZE(intervals) != cfg->kept)
        return 0;
    PyObject *secs = SLOT(state, cfg->off[RS_SECONDS]), *steps_ = SLOT(state, cfg->off[RS_STEPS]);
    if (secs == NULL || steps_ == NULL || !PyList_CheckExact(secs) || !PyList_CheckExact(steps_))
        return 0;
    Py_INCREF(intervals);
    Py_INCREF(secs);
    Py_INCREF(steps_);
    int result = 0;
    PyObject *oldest = PySequence_GetItem(intervals, 0), *pair = NULL, *called = NULL, *old_s = NULL, *old_n = NULL;
    PyObject *median = NULL, *f_old = NULL, *f_new = NULL, *middle = NULL, *usual = NULL;
    if (oldest == NULL) {
        result = -1;
        goto done;
    }
    if (!PyTuple_CheckExact(oldest) || PyTuple_GET_SIZE(oldest) != 2)
        goto done;
    old_s = Py_NewRef(PyTuple_GET_ITEM(oldest, 0));
    old_n = Py_NewRef(PyTuple_GET_ITEM(oldest, 1));
    result = -1;
    pair = PyTuple_Pack(2, seconds, steps);
    called = pair == NULL ? NULL : PyObject_CallMethodOneArg(intervals, rs_append_name, pair);
    if (called == NULL)
        goto done;
    int differs = PyObject_RichCompareBool(old_s, seconds, Py_NE);
    if (differs < 0)
        goto done;
    if (differs) {
        median = slid_median(cfg, secs, old_s, seconds);
        if (median == NULL)
            goto done;
        set_slot(state, cfg->off[RS_USUAL_S], median);
    }
    differs = PyObject_RichCompareBool(old_n, steps, Py_NE);
    if (differs < 0)
        goto done;
    if (differs) {
        f_old = PyNumber_Float(old_n);
        f_new = f_old == NULL ? NULL : PyNumber_Float(steps);
        middle = f_new == NULL ? NULL : slid_median(cfg, steps_, f_old, f_new);
        usual = middle == NULL ? NULL : PyNumber_Long(middle);
        if (usual == NULL)
            goto done;
        PyObject *one = PyLong_FromLong(1);
        int above = one == NULL ? -1 : PyObject_RichCompareBool(usual, one, Py_GT);
        if (above < 0) {
            Py_XDECREF(one);
            goto done;
        }
        set_slot(state, cfg->off[RS_USUAL_N], above ? usual : one);
        Py_DECREF(one);
    }
    result = 1;
done:
    Py_XDECREF(usual);
    Py_XDECREF(middle);
    Py_XDECREF(f_new);
    Py_XDECREF(f_old);
    Py_XDECREF(median);
    Py_XDECREF(called);
    Py_XDECREF(pair);
    Py_XDECREF(old_n);
    Py_XDECREF(old_s);
    Py_XDECREF(oldest);
    Py_DECREF(steps_);
    Py_DECREF(secs);
    Py_DECREF(intervals);
    return result;
}

/* One line of ``rank_steps`` (its rank, time, source, step and clocked,
 * each held by the caller): 0 taken (or passed over, as Python passes it
 * over), 1 not taken (nothing of it done but what Python would do again
 * the same: Python reads it; ``rank_of_source`` and ``new_rank`` may have
 * been asked already, and ``new_rank`` is asked again only where it did
 * not keep the state it made, which ``Straggler._state`` always does),
 * -1 an error. */
static int
rank_line(const RankCfg *cfg, PyObject *ranks, PyObject *rank, PyObject *t, PyObject *source, PyObject *step,
          PyObject *clocked, PyObject *window_s, PyObject *new_rank, PyObject *rank_of_source, int *stepped,
          int *advanced)
{
    PyObject *found_rank = NULL, *state = NULL, *measured = NULL, *counted = NULL, *last = NULL, *at = NULL;
    int result = -1;
    if (rank == Py_None) {
        found_rank = PyObject_CallOneArg(rank_of_source, source);
        if (found_rank == NULL)
            return -1;
        if (found_rank == Py_None) {
            Py_DECREF(found_rank);
            return 0;
        }
        rank = found_rank;
    }
    state = Py_XNewRef(PyDict_GetItemWithError(ranks, rank));
    if (state == NULL) {
        if (PyErr_Occurred())
            goto done;
        state = PyObject_CallFunctionObjArgs(new_rank, rank, t, NULL);
        if (state == NULL)
            goto done;
        if (state == Py_None) {
            result = 0;
            goto done;
        }
    }
    result = 1; /* not taken, unless every slot reads as Python reads it */
    if (Py_TYPE(state) != cfg->cls)
        goto done;
    for (int k = 0; k < RS_FIELDS; k++)
        if (SLOT(state, cfg->off[k]) == NULL)
            goto done;
    if (!PyDict_CheckExact(SLOT(state, cfg->off[RS_MEASURED])) ||
        !PyDict_CheckExact(SLOT(state, cfg->off[RS_SERIES])))
        goto done;
    result = -1;
    PyObject *seen_at = Py_NewRef(SLOT(state, cfg->off[RS_LAST_SEEN])); /* held: the compare may run code */
    int later = seen_at == Py_None ? 1 : PyObject_RichCompareBool(t, seen_at, Py_GT);
    Py_DECREF(seen_at);
    if (later < 0)
        goto done;
    if (later)
        set_slot(state, cfg->off[RS_LAST_SEEN], t);
    int truthy = PyObject_IsTrue(source);
    if (truthy < 0)
        goto done;
    if (truthy)
        set_slot(state, cfg->off[RS_SOURCE], source);
    if (step == Py_None) {
        result = 0;
        goto done;
    }
    /* (Slots read again after each call that may have run Python code: one
     * emptied meanwhile leaves the line to Python, which redoes the two
     * stores above to the same effect and raises as it does.) */
    result = 1;
    measured = Py_XNewRef(SLOT(state, cfg->off[RS_MEASURED]));
    if (measured == NULL || !PyDict_CheckExact(measured))
        goto done;
    result = -1;
    *stepped = 1;
    counted = Py_XNewRef(PyDict_GetItemWithError(measured, rs_log_key)); /* each read held: calls may change it */
    int fresh = 1;
    if (counted != NULL && counted != Py_None)
        fresh = PyObject_RichCompareBool(step, counted, Py_GT);
    else if (PyErr_Occurred())
        goto done;
    if (fresh < 0)
        goto done;
    last = Py_XNewRef(SLOT(state, cfg->off[RS_LAST_STEP]));
    if (last == NULL) {
        result = 1;
        goto done;
    }
    int ahead = last == Py_None ? 1 : PyObject_RichCompareBool(step, last, Py_GT);
    if (ahead < 0)
        goto done;
    if (ahead) {
        if (fresh)
            *advanced = 1;
        at = Py_XNewRef(SLOT(state, cfg->off[RS_LAST_STEP_TIME]));
        if (at == NULL) {
            result = 1;
            goto done;
        }
        /* (``clocked``'s truth asked where Python asks it, each time) */
        int timed = PyObject_IsTrue(clocked);
        if (timed < 0)
            goto done;
        timed = timed && last != Py_None && at != Py_None;
        if (timed) {
            timed = PyObject_RichCompareBool(t, at, Py_GT);
            if (timed < 0)
                goto done;
        }
        if (timed) {
            PyObject *seconds = PyNumber_Subtract(t, at);
            PyObject *steps_n = seconds == NULL ? NULL : PyNumber_Subtract(step, last);
            /* Inlined while the class's ``_interval`` is its own (looked up at
             * each interval: a call may replace it). */
            int slid = steps_n == NULL ? -1
                       : _PyType_Lookup(cfg->cls, rs_interval_name) == cfg->interval_fn
                           ? rank_interval(cfg, state, seconds, steps_n)
                           : 0;
            if (slid == 0) { /* not the full window's common case: the method itself */
                PyObject *called = PyObject_CallMethodObjArgs(state, rs_interval_name, seconds, steps_n, NULL);
                slid = called == NULL ? -1 : 1;
                Py_XDECREF(called);
            }
            Py_XDECREF(seconds);
            Py_XDECREF(steps_n);
            if (slid < 0)
                goto done;
        }
        set_slot(state, cfg->off[RS_LAST_STEP], step);
        set_slot(state, cfg->off[RS_LAST_STEP_TIME], t);
        set_slot(state, cfg->off[RS_HEARTBEAT], Py_None);
        set_slot(state, cfg->off[RS_TIMED_OUT], Py_False);
    }
    if (fresh) {
        if (PyDict_SetItem(measured, rs_log_key, step) < 0)
            goto done;
        int is_clocked = PyObject_IsTrue(clocked);
        if (is_clocked < 0)
            goto done;
        if (is_clocked) {
            PyObject *series = SLOT(state, cfg->off[RS_SERIES]);
            if (series == NULL) { /* (emptied by a call above: Python raises here) */
                PyErr_SetString(PyExc_AttributeError, "'RankState' object has no attribute 'series'");
                goto done;
            }
            Py_INCREF(series);
            int any = 0;
            for (int k = 0; any == 0 && k < 3; k++) {
                PyObject *values = PyObject_GetItem(series, rs_series_names[k]);
                any = values == NULL ? -1 : PyObject_IsTrue(values);
                Py_XDECREF(values);
            }
            Py_DECREF(series);
            if (any < 0)
                goto done;
            if (any) {
                PyObject *called = PyObject_CallMethodObjArgs(state, rs_prune_name, t, window_s, NULL);
                if (called == NULL)
                    goto done;
                Py_DECREF(called);
            }
        }
    }
    result = 0;
done:
    Py_XDECREF(at);
    Py_XDECREF(last);
    Py_XDECREF(counted);
    Py_XDECREF(measured);
    Py_XDECREF(state);
    Py_XDECREF(found_rank);
    return result;
}

static PyObject *
rank_steps(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyDict_Check(args[0]) || !PyList_Check(args[1]) || !PyTuple_Check(args[2]) ||
        PyTuple_GET_SIZE(args[2]) != 5) {
        PyErr_SetString(PyExc_TypeError, "rank_steps: ranks, steps, fields and three values");
        return NULL;
    }
    PyObject *ranks = args[0], *window_s = args[3], *new_rank = args[4], *rank_of_source = args[5];
    int stepped = 0, advanced = 0;
    if (rank_reg.cls == NULL || progress_type == NULL || progress_offsets[0] <= 0 || !PyDict_CheckExact(ranks))
        return Py_BuildValue("(nOO)", (Py_ssize_t)0, Py_False, Py_False);
    Py_ssize_t off[5];
    if (field_offsets(args[2], off, 5, "rank_steps") < 0)
        return NULL;
    if (rs_log_key == NULL) { /* (set last, once every other name is: all or none) */
        if (rs_interval_name == NULL)
            rs_interval_name = PyUnicode_InternFromString("_interval");
        if (rs_prune_name == NULL)
            rs_prune_name = PyUnicode_InternFromString("_prune");
        if (rs_append_name == NULL)
            rs_append_name = PyUnicode_InternFromString("append");
        const char *series[3] = {"step", "compute", "wait"};
        for (int k = 0; k < 3; k++)
            if (rs_series_names[k] == NULL)
                rs_series_names[k] = PyUnicode_InternFromString(series[k]);
        if (rs_interval_name == NULL || rs_prune_name == NULL || rs_append_name == NULL ||
            rs_series_names[0] == NULL || rs_series_names[1] == NULL || rs_series_names[2] == NULL)
            return NULL;
        rs_log_key = PyUnicode_InternFromString("log");
        if (rs_log_key == NULL)
            return NULL;
    }
    /* What was registered, held for the call (a call may register another);
     * taken only while the class still stores each field in its own slot
     * and sets attributes as any object does. */
    RankCfg cfg;
    rank_cfg_hold(&cfg, &rank_reg);
    int usable = cfg.cls->tp_setattro == PyObject_GenericSetAttr;
    for (Py_ssize_t k = 0; usable && k < RS_FIELDS; k++)
        usable = _PyType_Lookup(cfg.cls, PyTuple_GET_ITEM(cfg.names, k)) == PyTuple_GET_ITEM(cfg.descrs, k);
    if (!usable) {
        rank_cfg_release(&cfg);
        return Py_BuildValue("(nOO)", (Py_ssize_t)0, Py_False, Py_False);
    }
    /* The lines held, and each line's fields while it is read: the Python
     * calls may change the caller's list, or anything else. */
    Py_ssize_t n, i = 0;
    PyObject **own = hold_items(args[1], &n);
    if (own == NULL) {
        rank_cfg_release(&cfg);
        return NULL;
    }
    int status = 0;
    for (; i < n; i++) {
        PyObject *p = own[i];
        if (Py_TYPE(p) != progress_type)
            break;
        PyObject *fields[5];
        int empty = 0;
        for (int k = 0; k < 5; k++) {
            fields[k] = SLOT(p, off[k]);
            empty |= fields[k] == NULL;
        }
        if (empty)
            break;
        for (int k = 0; k < 5; k++)
            Py_INCREF(fields[k]);
        status = rank_line(&cfg, ranks, fields[0], fields[1], fields[2], fields[3], fields[4], window_s, new_rank,
                           rank_of_source, &stepped, &advanced);
        for (int k = 0; k < 5; k++)
            Py_DECREF(fields[k]);
        if (status)
            break;
    }
    rank_cfg_release(&cfg);
    release_items(own, n);
    if (status < 0)
        return NULL;
    return Py_BuildValue("(nOO)", i, stepped ? Py_True : Py_False, advanced ? Py_True : Py_False);
}

/* The registered RankState's four fields the hang rules read, each still
 * in its own slot; 0 where they are not (the callers then read in Python). */
static int
hung_fields(RankCfg *cfg)
{
    static const int wanted[4] = {RS_LAST_SEEN, RS_LAST_STEP, RS_LAST_STEP_TIME, RS_USUAL_S};
    rank_cfg_hold(cfg, &rank_reg);
    if (cfg->cls == NULL)
        return 0;
    for (int k = 0; k < 4; k++)
        if (_PyType_Lookup(cfg->cls, PyTuple_GET_ITEM(cfg->names, wanted[k])) !=
            PyTuple_GET_ITEM(cfg->descrs, wanted[k]))
            return 0;
    return 1;
}

/* A slot's value as a double: 1 a float, 0 None, -1 anything else. */
static int
float_or_none(PyObject *v, double *out)
{
    if (v == Py_None)
        return 0;
    if (!PyFloat_CheckExact(v))
        return -1;
    *out = PyFloat_AS_DOUBLE(v);
    return 1;
}

/* hung_pass(ranks, floor, factor, now) -> (stepped, last, busiest, soonest) | None
 *
 * ``straggler_hung.next_deadline``'s pass over the ranks (64 of them at
 * every judgement and every committed run of step lines): how many are
 * stepping, their latest step time (``at or 0.0``), the least cadence (None
 * where no stepping rank has one) and the earliest own silence end after
 * ``now``, with Python's comparisons and float arithmetic in its order
 * (the product held apart from the sum: no fused multiply-add). None
 * (Python reads them) where ``ranks`` is not a list of exactly the
 * registered RankState, a value read is neither a float nor None, or the
 * three figures are not floats. */
static PyObject *
hung_pass(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hung_pass: ranks, floor, factor, now");
        return NULL;
    }
    PyObject *ranks = args[0];
    if (!PyList_CheckExact(ranks) || !PyFloat_CheckExact(args[1]) || !PyFloat_CheckExact(args[2]) ||
        !PyFloat_CheckExact(args[3]))
        Py_RETURN_NONE;
    double floor = PyFloat_AS_DOUBLE(args[1]), factor = PyFloat_AS_DOUBLE(args[2]), now = PyFloat_AS_DOUBLE(args[3]);
    RankCfg cfg;
    if (!hung_fields(&cfg)) {
        rank_cfg_release(&cfg);
        Py_RETURN_NONE;
    }
    Py_ssize_t stepped = 0;
    double last = 0.0, busiest = 0.0, soonest = Py_HUGE_VAL;
    int has_busiest = 0, plain = 1;
    for (Py_ssize_t i = 0; plain && i < PyList_GET_SIZE(ranks); i++) {
        PyObject *s = PyList_GET_ITEM(ranks, i);
        if (Py_TYPE(s) != cfg.cls) {
            plain = 0;
            break;
        }
        PyObject *step = SLOT(s, cfg.off[RS_LAST_STEP]), *at_v = SLOT(s, cfg.off[RS_LAST_STEP_TIME]);
        PyObject *usual_v = SLOT(s, cfg.off[RS_USUAL_S]), *seen_v = SLOT(s, cfg.off[RS_LAST_SEEN]);
        if (step == NULL || at_v == NULL || usual_v == NULL || seen_v == NULL) {
            plain = 0;
            break;
        }
        double at = 0.0, usual = 0.0, seen = 0.0;
        int has_at = float_or_none(at_v, &at), has_usual = float_or_none(usual_v, &usual);
        int has_seen = float_or_none(seen_v, &seen);
        if (has_at < 0 || has_usual < 0 || has_seen < 0) {
            plain = 0;
            break;
        }
        if (step == Py_None || !has_at)
            continue; /* not stepping */
        if (at == 0.0)
            at = 0.0; /* ``at or 0.0``: -0.0 is false */
        if (!stepped || at > last)
            last = at;
        stepped++;
        if (!has_usual)
            continue;
        if (!has_busiest || usual < busiest) {
            busiest = usual;
            has_busiest = 1;
        }
        if (!has_seen)
            continue;
        volatile double own = factor * usual; /* rounded on its own, as Python's product is */
        double end = seen + (own > floor ? own : floor);
        if (now < end && end < soonest)
            soonest = end;
    }
    rank_cfg_release(&cfg);
    if (!plain)
        Py_RETURN_NONE;
    if (!has_busiest)
        return Py_BuildValue("(ndOd)", stepped, last, Py_None, soonest);
    return Py_BuildValue("(nddd)", stepped, last, busiest, soonest);
}

/* hung_floor(ranks, since) -> float | None
 *
 * ``straggler_hung.quiet_floor``: the least of the stepping ranks' latest
 * step time, the oldest ``last_seen`` of a rank with a cadence, and
 * ``since``, as ``min`` takes them in that order. ``ranks``: a list, a
 * tuple or a dict's values (the ranks' dict's, as the detector passes
 * them), of exactly the registered RankState: what Python can read again
 * where this declines, as a one-shot iterator could not be. None where
 * ``ranks`` is of another kind, a rank or a value read is, or ``since``
 * is not a float: Python reads them. */
static PyObject *
hung_floor(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "hung_floor: ranks, since");
        return NULL;
    }
    /* (a list, a tuple or a dict's values: read again by Python where this declines) */
    if (!PyFloat_CheckExact(args[1]) ||
        !(PyList_CheckExact(args[0]) || PyTuple_CheckExact(args[0]) || Py_IS_TYPE(args[0], &PyDictValues_Type)))
        Py_RETURN_NONE;
    RankCfg cfg;
    if (!hung_fields(&cfg)) {
        rank_cfg_release(&cfg);
        Py_RETURN_NONE;
    }
    PyObject *it = PyObject_GetIter(args[0]);
    if (it == NULL) {
        rank_cfg_release(&cfg);
        return NULL;
    }
    double last = -Py_HUGE_VAL, oldest = Py_HUGE_VAL;
    int plain = 1;
    PyObject *s;
    while (plain && (s = PyIter_Next(it)) != NULL) {
        PyObject *step = Py_TYPE(s) == cfg.cls ? SLOT(s, cfg.off[RS_LAST_STEP]) : NULL;
        PyObject *at_v = step == NULL ? NULL : SLOT(s, cfg.off[RS_LAST_STEP_TIME]);
        PyObject *usual_v = at_v == NULL ? NULL : SLOT(s, cfg.off[RS_USUAL_S]);
        PyObject *seen_v = usual_v == NULL ? NULL : SLOT(s, cfg.off[RS_LAST_SEEN]);
        double at = 0.0, usual = 0.0, seen = 0.0;
        int has_at = -1, has_usual = -1, has_seen = -1;
        if (seen_v != NULL) {
            has_at = float_or_none(at_v, &at);
            has_usual = float_or_none(usual_v, &usual);
            has_seen = float_or_none(seen_v, &seen);
        }
        Py_DECREF(s);
        if (has_at < 0 || has_usual < 0 || has_seen < 0) {
            plain = 0;
            break;
        }
        if (has_at && step != Py_None && at > last)
            last = at;
        if (has_usual && has_seen && seen < oldest)
            oldest = seen;
    }
    Py_DECREF(it);
    rank_cfg_release(&cfg);
    if (PyErr_Occurred())
        return NULL;
    if (!plain)
        Py_RETURN_NONE;
    double found = last > -Py_HUGE_VAL ? last : Py_HUGE_VAL;
    if (oldest < found)
        found = oldest;
    double since = PyFloat_AS_DOUBLE(args[1]);
    if (since < found)
        found = since;
    return PyFloat_FromDouble(found);
}

/* stream_tails(pending, ranks, streams, cut, keep) -> True | None
 *
 * ``crash_steps.StepLines._tails_of`` of many streams (one file, told
 * apart by rank): each stream's last ``keep`` lines of ``pending`` (a
 * line's stream: its rank, ``ranks[i]``; ``streams``: rank -> its deque of
 * ``(line, step, time)``), found newest first until every stream has them
 * (``_last_of_each``), appended oldest first as ``(int(number) if
 * number.isdigit() else -1, step, time)``, ``number`` the source past
 * ``cut``. True when done; None (nothing appended: Python does it) for a
 * line that is not exactly a ``Progress``, a kept source that is not an
 * ASCII str, a rank not among the streams, or lists of other types or
 * lengths. */
static PyObject *
stream_tails(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "stream_tails: five arguments");
        return NULL;
    }
    PyObject *pending = args[0], *ranks = args[1], *streams = args[2];
    Py_ssize_t cut = PyLong_AsSsize_t(args[3]), keep = PyLong_AsSsize_t(args[4]);
    if ((cut == -1 || keep == -1) && PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(pending) || !PyList_CheckExact(ranks) || !PyDict_CheckExact(streams) || cut < 0 ||
        keep < 1 || keep > 1024 || progress_type == NULL || progress_offsets[0] <= 0)
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(pending), m = PyDict_GET_SIZE(streams);
    if (PyList_GET_SIZE(ranks) != n || m == 0 || m > 4096)
        Py_RETURN_NONE;
    Py_ssize_t *where = tails_where;
    if (where[0] < 0 || where[1] < 0 || where[2] < 0) {
        where[0] = where[1] = where[2] = -1;
        PyObject *names = progress_names;
        for (Py_ssize_t f = 0; f < PyTuple_GET_SIZE(names); f++) {
            const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, f));
            if (name == NULL)
                return NULL;
            if (strcmp(name, "source") == 0)
                where[0] = progress_offsets[f];
            else if (strcmp(name, "step") == 0)
                where[1] = progress_offsets[f];
            else if (strcmp(name, "time") == 0)
                where[2] = progress_offsets[f];
        }
        if (where[0] < 0 || where[1] < 0 || where[2] < 0)
            Py_RETURN_NONE;
    }
    /* Held first: the allocations below may run the collector. */
    Py_ssize_t held_n, ranks_n;
    PyObject **own = hold_items(pending, &held_n);
    if (own == NULL)
        return NULL;
    PyObject **own_ranks = hold_items(ranks, &ranks_n);
    if (own_ranks == NULL) {
        release_items(own, held_n);
        return NULL;
    }
    PyObject *result = NULL, *index = PyDict_New(), *order = PyList_New(0);
    Py_ssize_t *picked = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(m * keep)),
               *count = PyMem_Calloc((size_t)m, sizeof(Py_ssize_t));
    PyObject **numbers = NULL;
    Py_ssize_t kept = 0;
    if (index == NULL || order == NULL || picked == NULL || count == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    /* Each stream's place, in the dict's order (its deques held in ``order``). */
    {
        Py_ssize_t at = 0, j = 0;
        PyObject *key, *value;
        while (PyDict_Next(streams, &at, &key, &value)) {
            Py_INCREF(key); /* held: hashing the key may run code that changes the dict */
            Py_INCREF(value);
            PyObject *place = PyLong_FromSsize_t(j++);
            int bad = place == NULL || PyDict_SetItem(index, key, place) < 0 || PyList_Append(order, value) < 0;
            Py_XDECREF(place);
            Py_DECREF(key);
            Py_DECREF(value);
            if (bad)
                goto done;
        }
        if (j != m || PyList_GET_SIZE(order) != m)
            goto refuse; /* (changed meanwhile) */
    }
    Py_ssize_t short_of = m;
    for (Py_ssize_t i = (held_n < ranks_n ? held_n : ranks_n) - 1; i >= 0 && short_of; i--) {
        PyObject *place = PyDict_GetItemWithError(index, own_ranks[i]);
        if (place == NULL) {
            if (PyErr_Occurred())
                goto done;
            goto refuse;
        }
        Py_ssize_t j = PyLong_AsSsize_t(place);
        if (count[j] < keep) {
            picked[j * keep + count[j]++] = i;
            if (count[j] == keep)
                short_of--;
        }
    }
    for (Py_ssize_t j = 0; j < m; j++)
        kept += count[j];
    /* Every kept line read before any append: its number, step and time. */
    numbers = PyMem_Calloc((size_t)(kept > 0 ? kept : 1), sizeof(PyObject *));
    if (numbers == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    {
        Py_ssize_t k = 0;
        for (Py_ssize_t j = 0; j < m; j++)
            for (Py_ssize_t c = 0; c < count[j]; c++, k++) {
                PyObject *p = own[picked[j * keep + c]];
                if (Py_TYPE(p) != progress_type)
                    goto refuse;
                PyObject *source = SLOT(p, where[0]);
                if (source == NULL || SLOT(p, where[1]) == NULL || SLOT(p, where[2]) == NULL ||
                    !PyUnicode_CheckExact(source) || !PyUnicode_IS_ASCII(source))
                    goto refuse;
                Py_ssize_t len = PyUnicode_GET_LENGTH(source);
                const char *digits = (const char *)PyUnicode_1BYTE_DATA(source) + cut;
                Py_ssize_t nd = len > cut ? len - cut : 0;
                int all = nd > 0;
                for (Py_ssize_t d = 0; all && d < nd; d++)
                    all = digits[d] >= '0' && digits[d] <= '9';
                if (!all)
                    numbers[k] = PyLong_FromLong(-1);
                else if (nd <= 18) {
                    long long v = 0;
                    for (Py_ssize_t d = 0; d < nd; d++)
                        v = v * 10 + (digits[d] - '0');
                    numbers[k] = PyLong_FromLongLong(v);
                } else
                    numbers[k] = PyLong_FromString(digits, NULL, 10); /* (the str's data ends in a NUL) */
                if (numbers[k] == NULL)
                    goto done;
            }
    }
    /* Each stream's lines oldest first, onto its deque in one extend. */
    {
        Py_ssize_t k = 0;
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *rows = PyList_New(count[j]);
            if (rows == NULL)
                goto done;
            for (Py_ssize_t c = 0; c < count[j]; c++) {
                Py_ssize_t first = k + count[j] - 1 - c; /* picked newest first */
                PyObject *p = own[picked[j * keep + count[j] - 1 - c]];
                PyObject *step = SLOT(p, where[1]), *time = SLOT(p, where[2]);
                if (step == NULL || time == NULL) { /* (emptied meanwhile: Python raises there) */
                    Py_DECREF(rows);
                    PyErr_SetString(PyExc_AttributeError, "a step line without its step or time");
                    goto done;
                }
                Py_INCREF(step); /* held across the allocation */
                Py_INCREF(time);
                PyObject *row = PyTuple_Pack(3, numbers[first], step, time);
                Py_DECREF(step);
                Py_DECREF(time);
                if (row == NULL) {
                    Py_DECREF(rows);
                    goto done;
                }
                PyList_SET_ITEM(rows, c, row);
            }
            k += count[j];
            PyObject *called = PyObject_CallMethod(PyList_GET_ITEM(order, j), "extend", "O", rows);
            Py_DECREF(rows);
            if (called == NULL)
                goto done;
            Py_DECREF(called);
        }
    }
    result = Py_NewRef(Py_True);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    if (numbers != NULL) {
        for (Py_ssize_t k = 0; k < kept; k++)
            Py_XDECREF(numbers[k]);
        PyMem_Free(numbers);
    }
    PyMem_Free(picked);
    PyMem_Free(count);
    Py_XDECREF(index);
    Py_XDECREF(order);
    release_items(own_ranks, ranks_n);
    release_items(own, held_n);
    return result;
}

/* margin_walk(points, times, smoothed, span, margin, lasts, least, since, count)
 *     -> (ref, points, since, count) | None | NotImplemented
 *
 * ``loss_steps._walk_margin``'s loop: the run's smoothed losses judged one
 * by one (``within_margin`` of the sliding minimum before each add; a rise
 * above it counted from ``since`` and fires once it lasts ``lasts``
 * seconds and ``least`` reports) on a copy of the minimum's deque (the
 * list ``points`` of ``(time, value)`` pairs), each add made as
 * ``SlidingMin.add`` makes it. None where one fires; else the last
 * minimum read (None: none), the deque after as a list (the pairs kept,
 * the same objects, and a new pair of each add that stays), and the rise.
 * NotImplemented (Python walks) unless every time and value is a float,
 * ``since`` a float or None, ``least`` and ``count`` ints within 62 bits.
 * The bound is rounded as Python rounds it: the product first, no fused
 * multiply-add. */
static PyObject *
margin_walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "margin_walk: three lists and six values");
        return NULL;
    }
    PyObject *since_obj = args[7];
    if (!PyFloat_CheckExact(args[3]) || !PyFloat_CheckExact(args[4]) || !PyFloat_CheckExact(args[5]) ||
        !PyLong_CheckExact(args[6]) || !PyLong_CheckExact(args[8]) ||
        !(since_obj == Py_None || PyFloat_CheckExact(since_obj)))
        Py_RETURN_NOTIMPLEMENTED;
    double span = PyFloat_AS_DOUBLE(args[3]), margin = PyFloat_AS_DOUBLE(args[4]), lasts = PyFloat_AS_DOUBLE(args[5]);
    int overflow = 0;
    long long least = PyLong_AsLongLongAndOverflow(args[6], &overflow);
    if (overflow || least >= WALK_LIM || least <= -WALK_LIM) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    long long count = PyLong_AsLongLongAndOverflow(args[8], &overflow);
    if (overflow || count >= WALK_LIM || count < 0) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* Every object read held first (the allocations below may run the
     * collector), then only C until the answer is built. */
    Py_ssize_t np, n, n2;
    PyObject **pts = hold_items(args[0], &np);
    if (pts == NULL)
        return NULL;
    PyObject **ts = hold_items(args[1], &n);
    if (ts == NULL) {
        release_items(pts, np);
        return NULL;
    }
    PyObject **vs = hold_items(args[2], &n2);
    if (vs == NULL) {
        release_items(ts, n);
        release_items(pts, np);
        return NULL;
    }
    Py_INCREF(since_obj);
    PyObject *result = NULL;
    Py_ssize_t cap = np + n;
    double *T = PyMem_Malloc(sizeof(double) * (size_t)(cap > 0 ? cap : 1));
    double *V = PyMem_Malloc(sizeof(double) * (size_t)(cap > 0 ? cap : 1));
    Py_ssize_t *src = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(cap > 0 ? cap : 1));
    if (T == NULL || V == NULL || src == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (n2 != n)
        goto not_mine;
    for (Py_ssize_t k = 0; k < np; k++) {
        PyObject *pair = pts[k];
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyFloat_CheckExact(PyTuple_GET_ITEM(pair, 0)) || !PyFloat_CheckExact(PyTuple_GET_ITEM(pair, 1)))
            goto not_mine;
        T[k] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(pair, 0));
        V[k] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(pair, 1));
        src[k] = k; /* >= 0: a pair kept; < 0: the add of report -1 - src */
    }
    for (Py_ssize_t j = 0; j < n; j++)
        if (!PyFloat_CheckExact(ts[j]) || !PyFloat_CheckExact(vs[j]))
            goto not_mine;
    Py_ssize_t head = 0, tail = np;
    int have_since = since_obj != Py_None;
    double since = have_since ? PyFloat_AS_DOUBLE(since_obj) : 0.0;
    Py_ssize_t since_at = -1; /* the report whose time ``since`` is (-1: the one given) */
    int have_ref = 0;
    double ref = 0.0;
    for (Py_ssize_t j = 0; j < n; j++) {
        double t = PyFloat_AS_DOUBLE(ts[j]), v = PyFloat_AS_DOUBLE(vs[j]);
        have_ref = tail > head;
        if (have_ref)
            ref = V[head];
        while (tail > head && V[tail - 1] >= v)
            tail--;
        T[tail] = t;
        V[tail] = v;
        src[tail++] = -1 - j;
        double cut = t - span;
        while (tail > head && T[head] < cut)
            head++;
        if (have_ref) {
            volatile double scaled = margin * fabs(ref); /* (rounded: no fused multiply-add) */
            double bound = ref + scaled;
            bound = bound + 1e-12;
            if (!(v <= bound)) {
                if (!have_since) {
                    have_since = 1;
                    since = t;
                    since_at = j;
                }
                count += 1;
                if (!(t - since < lasts || count < least)) {
                    result = Py_NewRef(Py_None); /* it fires */
                    goto done;
                }
                continue;
            }
        }
        have_since = 0;
        since_at = -1;
        count = 0;
    }
    {
        PyObject *kept = PyList_New(tail - head);
        if (kept == NULL)
            goto done;
        for (Py_ssize_t k = head; k < tail; k++) {
            PyObject *pair;
            if (src[k] >= 0)
                pair = Py_NewRef(pts[src[k]]);
            else {
                Py_ssize_t j = -1 - src[k];
                pair = PyTuple_Pack(2, ts[j], vs[j]);
                if (pair == NULL) {
                    Py_DECREF(kept);
                    goto done;
                }
            }
            PyList_SET_ITEM(kept, k - head, pair);
        }
        PyObject *ref_obj = have_ref ? PyFloat_FromDouble(ref) : Py_NewRef(Py_None);
        PyObject *since_out = !have_since ? Py_NewRef(Py_None) : since_at >= 0 ? Py_NewRef(ts[since_at])
                                                                                 : Py_NewRef(since_obj);
        if (ref_obj != NULL)
            result = Py_BuildValue("(NNNL)", ref_obj, kept, since_out, count);
        else {
            Py_DECREF(kept);
            Py_DECREF(since_out);
        }
    }
    goto done;
not_mine:
    result = Py_NewRef(Py_NotImplemented);
done:
    PyMem_Free(T);
    PyMem_Free(V);
    PyMem_Free(src);
    Py_DECREF(since_obj);
    release_items(vs, n2);
    release_items(ts, n);
    release_items(pts, np);
    return result;
}

/* columns(steps, which) -> tuple of lists | None
 *
 * The fields ``which`` (their places in ``Progress``'s fields, as
 * ``set_progress`` was told them) of every event of the list ``steps``,
 * one list per field: ``[p.<field> for p in steps]`` for each, in one pass
 * that reads each slot at its offset. The detectors read a run of step
 * lines in columns, a dozen passes a run; through the interpreter each
 * costs 10-20 ns a line. None (the caller reads them in Python) where the
 * fields are not plain slots, an item is not exactly a ``Progress`` or a
 * slot is empty (Python would raise). */
static PyObject *
columns(PyObject *self, PyObject *args)
{
    PyObject *steps, *which;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &steps, &PyTuple_Type, &which))
        return NULL;
    if (progress_type == NULL || progress_offsets[0] <= 0)
        Py_RETURN_NONE;
    if (PyTuple_GET_SIZE(which) > 16)
        Py_RETURN_NONE;
    Py_ssize_t offs[16];
    Py_ssize_t k = field_offsets(which, offs, 16, "columns");
    if (k < 0)
        return NULL;
    /* The items held: an allocation below may run the collector, and its
     * callbacks any code, the caller's list changing meanwhile. */
    Py_ssize_t n;
    PyObject **own = hold_items(steps, &n);
    if (own == NULL)
        return NULL;
    PyObject *out = PyTuple_New(k);
    if (out == NULL) {
        release_items(own, n);
        return NULL;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *col = PyList_New(n);
        if (col == NULL) {
            Py_DECREF(out);
            release_items(own, n);
            return NULL;
        }
        PyTuple_SET_ITEM(out, j, col);
    }
    /* (No allocation from here on: nothing runs while the slots are read.) */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = own[i];
        if (Py_TYPE(obj) != progress_type)
            goto python;
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *v = *(PyObject **)((char *)obj + offs[j]);
            if (v == NULL)
                goto python;
            PyList_SET_ITEM(PyTuple_GET_ITEM(out, j), i, Py_NewRef(v));
        }
    }
    release_items(own, n);
    return out;
python:
    Py_DECREF(out); /* (a list's unset items are NULL: freed as such) */
    release_items(own, n);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"take_run", take_run, METH_VARARGS, "LogStream._scan's walk over lines it only sets aside."},
    {"match_end", (PyCFunction)(void (*)(void))match_end, METH_FASTCALL, "Hyperscan's match handler: ends.append(end - 1)."},
    {"utf8_text", utf8_text, METH_O, "str(data, 'utf-8', 'replace') of ASCII or BMP UTF-8 bytes, else None."},
    {"ascii_bytes", ascii_bytes, METH_O, "An ASCII str's characters as a read-only memoryview, no copy."},
    {"slide_median", slide_median, METH_VARARGS, "A sliding window's median after each new value."},
    {"series_tops", series_tops, METH_VARARGS, "throughput_quiet._steady's walk over a run's steps."},
    {"minute_stamps", minute_stamps, METH_VARARGS, "TimeParser._minute_run's fast path over a run of lines."},
    {"last_minute", last_minute, METH_VARARGS, "LineTimes.latest's first look: the last line's stamp in the minute read last."},
    {"line_numbers", line_numbers, METH_VARARGS, "read_lanes' line numbers of a run: newlines counted between its starts."},
    {"in_order", in_order, METH_VARARGS, "lanes._read_in_order's loop over its common lines."},
    {"stall_walk", (PyCFunction)(void (*)(void))stall_walk, METH_FASTCALL, "stall.walk_steps in C."},
    {"fresh_series", (PyCFunction)(void (*)(void))fresh_series, METH_FASTCALL, "SeriesDeduper.peek of steps all new, picked per series."},
    {"lane_groups", (PyCFunction)(void (*)(void))lane_groups, METH_FASTCALL, "lanes._groups' picking of a run's lines by lane."},
    {"sources", (PyCFunction)(void (*)(void))sources, METH_FASTCALL, "Events' sources of a run: prefix + str(number), written once."},
    {"set_rank_state", set_rank_state, METH_VARARGS, "rank_steps' class of rank states and its fields."},
    {"hung_pass", (PyCFunction)(void (*)(void))hung_pass, METH_FASTCALL, "straggler_hung.next_deadline's pass in C."},
    {"hung_floor", (PyCFunction)(void (*)(void))hung_floor, METH_FASTCALL, "straggler_hung.quiet_floor in C."},
    {"rank_steps", (PyCFunction)(void (*)(void))rank_steps, METH_FASTCALL, "straggler_ranks.take_log_steps' loop in C."},
    {"stream_tails", (PyCFunction)(void (*)(void))stream_tails, METH_FASTCALL, "StepLines._tails_of of many streams."},
    {"margin_walk", (PyCFunction)(void (*)(void))margin_walk, METH_FASTCALL, "loss_steps._walk_margin's loop in C."},
    {"newlines", newlines, METH_O, "LineSplitter: data.count(b'\\n') of any buffer, newline to newline."},
    {"ascii_view", ascii_view, METH_O, "LogStream._view: '?' for each character outside ASCII."},
    {"metric_names", metric_names, METH_O, "The names of a run's metrics, as a set comprehension adds them."},
    {"fold_buckets", (PyCFunction)(void (*)(void))fold_buckets, METH_FASTCALL, "SeriesHistory._extend_buckets' fold of a batch into one tier."},
    {"window_swap", (PyCFunction)(void (*)(void))window_swap, METH_FASTCALL, "RankState._interval's slide of a full sorted window."},
    {"columns", columns, METH_VARARGS, "The detectors' columns of a run of Progress events: fields read at their slots."},
    {"rank_numbers", rank_numbers, METH_VARARGS, "_read_by_stretch's ranks of a stretch of ranked lines."},
    {"set_progress", set_progress, METH_VARARGS, "Tell build_progress the Progress class, its slots and defaults."},
    {"build_progress", (PyCFunction)(void (*)(void))build_progress, METH_FASTCALL | METH_KEYWORDS,
     "A Progress from its arguments, each field stored through its slot."},
    {"cut_numbers", cut_numbers, METH_VARARGS, "One number column of lines of one shape, as int or float reads it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "The compiled kernels of issue 20 (optional; see parsers.native).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "ABI", ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyType_Ready(&AsciiBytesType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject **names[] = {&n_stamp, &n_base, &n_elapsed, &n_step, &n_min_key, &n_min_val, &n_frac_len, &n_min_ym,
                          &n_year, &n_month};
    const char *texts[] = {"_stamp", "_base", "_elapsed", "_step", "_min_key", "_min_val", "_frac_len", "_min_ym",
                           "_year", "_month"};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        if (*names[k] == NULL && (*names[k] = PyUnicode_InternFromString(texts[k])) == NULL) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
