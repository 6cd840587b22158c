/* SPDX-License-Identifier: MIT */
/* linz.c - the linearizability checker of fenced records and tokens: see
 * linz.h for the history format, the model and the rules. */
#include "linz.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT64_MAX /* no response: the outcome is unknown */

enum { OP_ACQ, OP_COMMIT, OP_READ, OP_REL };
static const char *const op_name[] = {"acquire", "commit", "read", "release"};

/* What a commit's result means. */
enum { C_ACC, C_REJ, C_MAYBE, C_NOEFF };

enum { R_OK = 0, R_NONE = -1, R_OTHER = -2 };

struct lz_op {
    int kind, client, key, rec, value; /* interned names; -1: absent */
    int res;                           /* R_OK, R_NONE, R_OTHER or an errno value */
    int line;
    bool strict, has_acc, has_token, has_fence;
    uint64_t inv, resp; /* resp NONE: no answer */
    uint64_t token, acc, fence;
    /* commits: how its value was seen */
    int cls;
    bool seen;
    uint64_t read_maxinv, read_minresp;
};

struct lz_history {
    struct lz_op *ops;
    size_t n, cap;
    char **names; /* interned strings */
    size_t nnames, capnames;
    int *hash;    /* open addressing: index into names, -1 */
    size_t hcap;
    long bad_lines;
    char bad_first[256];
    uint64_t t0;
};

/* ---- names ----------------------------------------------------------------- */

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int intern(lz_history *h, const char *s, size_t len)
{
    if (h->nnames * 2 + 2 > h->hcap) {
        size_t ncap = h->hcap ? h->hcap * 2 : 1024;
        int *nh = malloc(ncap * sizeof *nh);
        if (!nh)
            abort();
        for (size_t i = 0; i < ncap; i++)
            nh[i] = -1;
        for (size_t i = 0; i < h->nnames; i++) {
            size_t j = fnv(h->names[i], strlen(h->names[i])) & (ncap - 1);
            while (nh[j] >= 0)
                j = (j + 1) & (ncap - 1);
            nh[j] = (int)i;
        }
        free(h->hash);
        h->hash = nh;
        h->hcap = ncap;
    }
    size_t j = fnv(s, len) & (h->hcap - 1);
    while (h->hash[j] >= 0) {
        const char *t = h->names[h->hash[j]];
        if (strlen(t) == len && memcmp(t, s, len) == 0)
            return h->hash[j];
        j = (j + 1) & (h->hcap - 1);
    }
    if (h->nnames == h->capnames) {
        h->capnames = h->capnames ? h->capnames * 2 : 1024;
        h->names = realloc(h->names, h->capnames * sizeof *h->names);
        if (!h->names)
            abort();
    }
    char *d = malloc(len + 1);
    if (!d)
        abort();
    memcpy(d, s, len);
    d[len] = '\0';
    h->names[h->nnames] = d;
    h->hash[j] = (int)h->nnames;
    return (int)h->nnames++;
}

static const char *name_of(const lz_history *h, int id)
{
    return id >= 0 && (size_t)id < h->nnames ? h->names[id] : "?";
}

/* ---- parsing ---------------------------------------------------------------- */

static const struct {
    const char *name;
    int value;
} errnames[] = {
    {"ESTALE", ESTALE},     {"EAGAIN", EAGAIN},       {"EHOSTUNREACH", EHOSTUNREACH},
    {"ENOENT", ENOENT},     {"EBUSY", EBUSY},         {"ETIMEDOUT", ETIMEDOUT},
    {"EXDEV", EXDEV},       {"EPROTO", EPROTO},       {"EINVAL", EINVAL},
    {"EOVERFLOW", EOVERFLOW}, {"ENOSPC", ENOSPC},     {"EMSGSIZE", EMSGSIZE},
    {"EACCES", EACCES},     {"EDEADLK", EDEADLK},     {"ECANCELED", ECANCELED},
    {"ENOTRECOVERABLE", ENOTRECOVERABLE},
};

static int parse_result(const char *s)
{
    if (strcmp(s, "ok") == 0 || strcmp(s, "0") == 0)
        return R_OK;
    if (strcmp(s, "-") == 0)
        return R_NONE;
    for (size_t i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
        if (strcmp(s, errnames[i].name) == 0)
            return errnames[i].value;
    return R_OTHER;
}

static const char *result_name(int res)
{
    if (res == R_OK)
        return "ok";
    if (res == R_NONE)
        return "-";
    for (size_t i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
        if (errnames[i].value == res)
            return errnames[i].name;
    return "error";
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-')
        return false;
    *v = x;
    return true;
}

static int bad(lz_history *h, const char *line, const char *why)
{
    if (!h->bad_lines++)
        snprintf(h->bad_first, sizeof h->bad_first, "%s: %.200s", why, line);
    return -1;
}

int lz_add_line(lz_history *h, const char *line)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", line);
    char *hash = strchr(buf, '#');
    if (hash)
        *hash = '\0';
    char *tok[32];
    int nt = 0;
    for (char *save = NULL, *t = strtok_r(buf, " \t\r\n", &save); t && nt < 32;
         t = strtok_r(NULL, " \t\r\n", &save))
        tok[nt++] = t;
    if (nt == 0)
        return 0;
    if (nt < 5)
        return bad(h, line, "fewer than 5 fields");
    struct lz_op op;
    memset(&op, 0, sizeof op);
    op.key = op.rec = op.value = -1;
    op.line = (int)h->n + 1;
    op.client = intern(h, tok[0], strlen(tok[0]));
    op.kind = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(tok[1], op_name[k]) == 0)
            op.kind = k;
    if (op.kind < 0)
        return bad(h, line, "unknown operation");
    if (!parse_u64(tok[2], &op.inv))
        return bad(h, line, "bad invocation time");
    if (strcmp(tok[3], "-") == 0)
        op.resp = NONE;
    else if (!parse_u64(tok[3], &op.resp) || op.resp < op.inv)
        return bad(h, line, "bad response time");
    op.res = parse_result(tok[4]);
    if ((op.resp == NONE) != (op.res == R_NONE))
        return bad(h, line, "a response time needs a result, and '-' both");
    for (int i = 5; i < nt; i++) {
        char *eq = strchr(tok[i], '=');
        if (!eq)
            return bad(h, line, "a field without '='");
        *eq = '\0';
        const char *k = tok[i], *v = eq + 1;
        bool ok = true;
        if (strcmp(k, "key") == 0)
            op.key = intern(h, v, strlen(v));
        else if (strcmp(k, "rec") == 0)
            op.rec = intern(h, v, strlen(v));
        else if (strcmp(k, "value") == 0)
            op.value = intern(h, v, strlen(v));
        else if (strcmp(k, "token") == 0)
            ok = op.has_token = parse_u64(v, &op.token);
        else if (strcmp(k, "acc") == 0)
            ok = op.has_acc = parse_u64(v, &op.acc);
        else if (strcmp(k, "fence") == 0)
            ok = op.has_fence = parse_u64(v, &op.fence);
        else if (strcmp(k, "strict") == 0)
            op.strict = strcmp(v, "1") == 0;
        /* other fields are the writer's notes */
        if (!ok)
            return bad(h, line, "a number that is not one");
    }
    bool need_key = op.kind != OP_READ, need_rec = op.kind == OP_COMMIT || op.kind == OP_READ;
    if ((need_key && op.key < 0) || (need_rec && op.rec < 0))
        return bad(h, line, "key= or rec= missing");
    if (op.kind == OP_COMMIT && (!op.has_token || op.value < 0))
        return bad(h, line, "a commit needs token= and value=");
    if (op.kind == OP_COMMIT && op.res == ESTALE && !op.has_acc)
        return bad(h, line, "a rejected commit needs acc=");
    if ((op.kind == OP_ACQ || op.kind == OP_REL) && op.res == R_OK && !op.has_token)
        return bad(h, line, "token= missing");
    if (op.kind == OP_READ && op.res == R_OK && (op.value < 0 || !op.has_fence))
        return bad(h, line, "a read that returned needs value= and fence=");
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 4096;
        h->ops = realloc(h->ops, h->cap * sizeof *h->ops);
        if (!h->ops)
            abort();
    }
    h->ops[h->n++] = op;
    return 0;
}

lz_history *lz_new(void)
{
    lz_history *h = calloc(1, sizeof *h);
    if (!h)
        abort();
    return h;
}

void lz_free(lz_history *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->nnames; i++)
        free(h->names[i]);
    free(h->names);
    free(h->hash);
    free(h->ops);
    free(h);
}

int lz_load(lz_history *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    while (fgets(line, sizeof line, f))
        lz_add_line(h, line);
    fclose(f);
    return 0;
}

/* ---- reporting ---------------------------------------------------------------- */

enum {
    V_TOKEN_DUP, V_TOKEN_ORDER, V_RELEASE_LATE, V_COMMIT_UNISSUED, V_COMMIT_ACC, V_COMMIT_ORDER,
    V_REJECT_WRONG, V_REJECT_UNWRITTEN, V_READ_UNKNOWN, V_READ_REJECTED, V_READ_NOEFFECT,
    V_READ_FENCE, V_READ_FUTURE, V_READ_STALE, V_LINEARIZABILITY, V_BAD, V_N
};
static const char *const vname[V_N] = {
    "token-duplicate", "token-order",      "release-late",  "commit-unissued",
    "commit-acc",      "commit-order",     "reject-wrong",  "reject-unwritten",
    "read-unknown",    "read-rejected",    "read-noeffect", "read-fence",
    "read-future",     "read-stale",       "linearizability", "bad-history"};

struct ck {
    lz_history *h;
    FILE *out;
    int show;
    long count[V_N];
};

static void viol(struct ck *c, int v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void viol(struct ck *c, int v, const char *fmt, ...)
{
    if (c->show && c->count[v] >= c->show) {
        c->count[v]++;
        return;
    }
    c->count[v]++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(c->out, "VIOLATION %s: ", vname[v]);
    vfprintf(c->out, fmt, ap);
    fputc('\n', c->out);
    va_end(ap);
}

static double ms(const lz_history *h, uint64_t t)
{
    return t == NONE ? -1.0 : ((double)t - (double)h->t0) / 1e6;
}

/* "c3 commit rec=r0 key=k0 token=7 value=v [12.000, 13.500] ms ok" */
static const char *desc(const lz_history *h, const struct lz_op *o, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s %s", name_of(h, o->client), op_name[o->kind]);
    if (o->key >= 0)
        n += snprintf(buf + n, cap - (size_t)n, " key=%s", name_of(h, o->key));
    if (o->rec >= 0)
        n += snprintf(buf + n, cap - (size_t)n, " rec=%s", name_of(h, o->rec));
    if (o->has_token)
        n += snprintf(buf + n, cap - (size_t)n, " token=%" PRIu64, o->token);
    if (o->strict)
        n += snprintf(buf + n, cap - (size_t)n, " strict");
    if (o->value >= 0)
        n += snprintf(buf + n, cap - (size_t)n, " value=%s", name_of(h, o->value));
    if (o->has_acc)
        n += snprintf(buf + n, cap - (size_t)n, " acc=%" PRIu64, o->acc);
    if (o->has_fence)
        n += snprintf(buf + n, cap - (size_t)n, " fence=%" PRIu64, o->fence);
    if (o->resp == NONE)
        snprintf(buf + n, cap - (size_t)n, " [%.3f ms, no answer] (line %d)", ms(h, o->inv),
                 o->line);
    else
        snprintf(buf + n, cap - (size_t)n, " [%.3f, %.3f] ms %s (line %d)", ms(h, o->inv),
                 ms(h, o->resp), result_name(o->res), o->line);
    return buf;
}

/* ---- helpers -------------------------------------------------------------------- */

static const struct lz_op *g_ops; /* for qsort */

static int by_token_inv(const void *a, const void *b)
{
    const struct lz_op *x = &g_ops[*(const size_t *)a], *y = &g_ops[*(const size_t *)b];
    if (x->token != y->token)
        return x->token < y->token ? -1 : 1;
    if (x->inv != y->inv)
        return x->inv < y->inv ? -1 : 1;
    return x->line - y->line;
}

static void sort_by_token(size_t *idx, size_t n, const struct lz_op *ops)
{
    g_ops = ops;
    qsort(idx, n, sizeof *idx, by_token_inv);
}

/* Among idx[] sorted by token: the first position whose token > t. */
static size_t upper(const size_t *idx, size_t n, const struct lz_op *ops, uint64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ops[idx[mid]].token <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* sufmin[i] = the index (into idx) of the smallest response among idx[i..n). */
static size_t *suffix_min_resp(const size_t *idx, size_t n, const struct lz_op *ops)
{
    size_t *s = malloc((n + 1) * sizeof *s);
    if (!s)
        abort();
    s[n] = SIZE_MAX;
    for (size_t i = n; i-- > 0;) {
        s[i] = i;
        if (s[i + 1] != SIZE_MAX && ops[idx[s[i + 1]]].resp < ops[idx[i]].resp)
            s[i] = s[i + 1];
    }
    return s;
}

/* ---- keys: I1 and releases ---------------------------------------------------------- */

static void check_key(struct ck *c, int key)
{
    lz_history *h = c->h;
    struct lz_op *ops = h->ops;
    size_t n = 0;
    size_t *acq = malloc((h->n + 1) * sizeof *acq);
    if (!acq)
        abort();
    for (size_t i = 0; i < h->n; i++)
        if (ops[i].kind == OP_ACQ && ops[i].key == key && ops[i].res == R_OK)
            acq[n++] = i;
    sort_by_token(acq, n, ops);
    char b1[512], b2[512];
    for (size_t i = 1; i < n; i++)
        if (ops[acq[i]].token == ops[acq[i - 1]].token)
            viol(c, V_TOKEN_DUP, "%s and %s", desc(h, &ops[acq[i - 1]], b1, sizeof b1),
                 desc(h, &ops[acq[i]], b2, sizeof b2));
    size_t *suf = suffix_min_resp(acq, n, ops);
    for (size_t i = 0; i < n; i++) {
        const struct lz_op *y = &ops[acq[i]];
        size_t u = upper(acq, n, ops, y->token);
        if (u < n && ops[acq[suf[u]]].resp < y->inv)
            viol(c, V_TOKEN_ORDER, "%s returned before %s was invoked",
                 desc(h, &ops[acq[suf[u]]], b1, sizeof b1), desc(h, y, b2, sizeof b2));
    }
    for (size_t i = 0; i < h->n; i++) {
        const struct lz_op *r = &ops[i];
        if (r->kind != OP_REL || r->key != key || r->res != R_OK)
            continue;
        size_t u = upper(acq, n, ops, r->token);
        if (u < n && ops[acq[suf[u]]].resp < r->inv)
            viol(c, V_RELEASE_LATE, "%s returned ok after %s had returned",
                 desc(h, r, b1, sizeof b1), desc(h, &ops[acq[suf[u]]], b2, sizeof b2));
    }
    /* Accepted commits carry tokens their key handed out before. */
    for (size_t i = 0; i < h->n; i++) {
        const struct lz_op *w = &ops[i];
        if (w->kind != OP_COMMIT || w->key != key || w->res != R_OK)
            continue;
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ops[acq[mid]].token < w->token)
                lo = mid + 1;
            else
                hi = mid;
        }
        bool issued = false;
        for (size_t j = lo; j < n && ops[acq[j]].token == w->token; j++)
            issued |= ops[acq[j]].resp <= w->inv;
        if (!issued)
            viol(c, V_COMMIT_UNISSUED, "%s: no acquisition of key %s returned token %" PRIu64
                                       " before it",
                 desc(h, w, b1, sizeof b1), name_of(h, key), w->token);
    }
    free(suf);
    free(acq);
}

/* ---- records ----------------------------------------------------------------------- */

struct grp {
    size_t *m; /* members: op indexes, in invocation order */
    int n;
    uint64_t rej_minresp, rej_maxinv;
    bool has_rej;
    int rej_op; /* one rejection naming the token, -1 */
};

struct dfs {
    const struct lz_op *ops;
    const struct grp *g;
    bool required[16];
    uint64_t best;
    int best_order[16], order[16], best_len;
};

/* Place the group's members one by one from time t: members that must be in
 * (accepted, or seen) all placed, unknown ones in or out; accepted ones in
 * invocation order (one client's), strict ones only first; each point p in
 * [max(t, inv), min(resp, first read's response of it, for the first: the
 * first rejection's response)], the next t at least every read of it. */
static void dfs(struct dfs *d, unsigned used, int pos, uint64_t t)
{
    const struct grp *g = d->g;
    bool all_required = true;
    int next_acc = -1;
    for (int i = 0; i < g->n; i++) {
        if (used & (1u << i))
            continue;
        if (d->required[i])
            all_required = false;
        if (d->ops[g->m[i]].cls == C_ACC && next_acc < 0)
            next_acc = i;
    }
    if (all_required && (pos > 0 || !g->has_rej)) {
        uint64_t end = g->has_rej && g->rej_maxinv > t ? g->rej_maxinv : t;
        if (end < d->best) {
            d->best = end;
            d->best_len = pos;
            memcpy(d->best_order, d->order, sizeof d->order);
        }
    }
    for (int i = 0; i < g->n; i++) {
        if (used & (1u << i))
            continue;
        const struct lz_op *w = &d->ops[g->m[i]];
        if (w->cls == C_ACC && i != next_acc)
            continue;
        if (w->strict && pos > 0)
            continue;
        uint64_t p = t > w->inv ? t : w->inv;
        uint64_t end = w->cls == C_MAYBE ? NONE : w->resp; /* unknown: any time after */
        uint64_t hi = end < w->read_minresp ? end : w->read_minresp;
        if (pos == 0 && g->has_rej && g->rej_minresp < hi)
            hi = g->rej_minresp;
        if (p > hi)
            continue;
        uint64_t nt = p > w->read_maxinv ? p : w->read_maxinv;
        d->order[pos] = i;
        dfs(d, used | (1u << i), pos + 1, nt);
    }
}

/* Why no placement works: walk the group in invocation order and say which
 * bound is crossed first. */
static void explain(struct ck *c, const struct grp *g, uint64_t t, const char *t_why)
{
    lz_history *h = c->h;
    char b1[512];
    uint64_t tt = t;
    for (int i = 0, pos = 0; i < g->n; i++) {
        const struct lz_op *w = &h->ops[g->m[i]];
        if (w->cls != C_ACC && !w->seen)
            continue;
        bool first = pos++ == 0;
        uint64_t p = tt > w->inv ? tt : w->inv;
        uint64_t hi = w->cls == C_MAYBE ? NONE : w->resp;
        const char *hi_why = "its own response";
        if (w->read_minresp < hi) {
            hi = w->read_minresp;
            hi_why = "the response of a read that returned its value";
        }
        if (first && g->has_rej && g->rej_minresp < hi) {
            hi = g->rej_minresp;
            hi_why = "the response of a rejection naming its token";
        }
        if (w->strict && !first) {
            viol(c, V_LINEARIZABILITY,
                 "%s: a strict commit accepted after a commit of its own token", desc(h, w, b1,
                                                                                      sizeof b1));
            return;
        }
        if (p > hi) {
            viol(c, V_LINEARIZABILITY,
                 "%s cannot take effect: not before %.3f ms (%s) and not after %.3f ms (%s)",
                 desc(h, w, b1, sizeof b1), ms(h, p), p == tt ? t_why : "its invocation",
                 ms(h, hi), hi_why);
            return;
        }
        tt = p > w->read_maxinv ? p : w->read_maxinv;
        if (tt != p)
            t_why = "a read of the value before it was invoked then";
        else
            t_why = "the commit before it took effect then";
    }
    if (g->n > 0)
        viol(c, V_LINEARIZABILITY, "%s: no order of token %" PRIu64
                                   "'s commits explains the reads and rejections",
             desc(h, &h->ops[g->m[0]], b1, sizeof b1), h->ops[g->m[0]].token);
}

static void check_record(struct ck *c, int rec, int *value_slot)
{
    lz_history *h = c->h;
    struct lz_op *ops = h->ops;
    size_t *w = malloc((h->n + 1) * sizeof *w), nw = 0; /* accepted and unknown commits */
    size_t *acc = malloc((h->n + 1) * sizeof *acc), nacc = 0;
    if (!w || !acc)
        abort();
    char b1[512], b2[512], b3[512];
    /* Commits: classify, and map values to them. */
    for (size_t i = 0; i < h->n; i++) {
        struct lz_op *o = &ops[i];
        if (o->kind != OP_COMMIT || o->rec != rec)
            continue;
        o->cls = o->res == R_OK                                       ? C_ACC
                 : o->res == ESTALE                                   ? C_REJ
                 : o->res == EAGAIN || o->res == EPROTO || o->res == R_NONE ? C_MAYBE
                                                                      : C_NOEFF;
        o->seen = false;
        o->read_maxinv = 0;
        o->read_minresp = NONE;
        if (value_slot[o->value] >= 0) {
            viol(c, V_BAD, "%s repeats the value of %s", desc(h, o, b1, sizeof b1),
                 desc(h, &ops[value_slot[o->value]], b2, sizeof b2));
            continue;
        }
        value_slot[o->value] = (int)i;
        if (o->cls == C_ACC) {
            acc[nacc++] = i;
            if (o->has_acc && o->acc != o->token)
                viol(c, V_COMMIT_ACC, "%s", desc(h, o, b1, sizeof b1));
        }
        if (o->cls == C_ACC || o->cls == C_MAYBE)
            w[nw++] = i;
    }
    sort_by_token(acc, nacc, ops);
    sort_by_token(w, nw, ops);
    size_t *suf = suffix_min_resp(acc, nacc, ops);
    uint64_t acc_minresp = nacc ? ops[acc[suf[0]]].resp : NONE;

    /* Accepted commits in real-time order carry non-decreasing tokens. */
    for (size_t i = 0; i < nacc; i++) {
        const struct lz_op *b = &ops[acc[i]];
        size_t u = upper(acc, nacc, ops, b->token);
        if (u < nacc && ops[acc[suf[u]]].resp < b->inv)
            viol(c, V_COMMIT_ORDER, "%s was accepted after %s had returned",
                 desc(h, b, b1, sizeof b1), desc(h, &ops[acc[suf[u]]], b2, sizeof b2));
        else if (b->strict)
            for (size_t j = 0; j < nacc; j++) {
                const struct lz_op *a = &ops[acc[j]];
                if (a != b && a->token == b->token && a->resp < b->inv) {
                    viol(c, V_COMMIT_ORDER, "%s was accepted after %s had returned",
                         desc(h, b, b1, sizeof b1), desc(h, a, b2, sizeof b2));
                    break;
                }
            }
    }

    /* Rejections. */
    uint64_t t0 = 0; /* every commit takes effect after the invocation of an ENOENT read */
    for (size_t i = 0; i < h->n; i++) {
        struct lz_op *x = &ops[i];
        if (x->kind != OP_COMMIT || x->rec != rec || x->cls != C_REJ)
            continue;
        if (x->strict ? x->acc < x->token : x->acc <= x->token)
            viol(c, V_REJECT_WRONG, "%s: %s", desc(h, x, b1, sizeof b1),
                 x->strict ? "a strict commit is refused only below or at the fence"
                           : "a commit is refused only below the fence");
        bool written = false;
        for (size_t j = 0; j < nw && !written; j++)
            written = ops[w[j]].token == x->acc;
        if (!written)
            viol(c, V_REJECT_UNWRITTEN, "%s: no commit of record %s carried token %" PRIu64,
                 desc(h, x, b1, sizeof b1), name_of(h, rec), x->acc);
    }

    /* Reads. */
    for (size_t i = 0; i < h->n; i++) {
        const struct lz_op *r = &ops[i];
        if (r->kind != OP_READ || r->rec != rec)
            continue;
        if (r->res == ENOENT) {
            if (acc_minresp < r->inv)
                viol(c, V_READ_STALE, "%s: ENOENT after %s had returned",
                     desc(h, r, b1, sizeof b1), desc(h, &ops[acc[suf[0]]], b2, sizeof b2));
            if (r->inv > t0)
                t0 = r->inv;
            continue;
        }
        if (r->res != R_OK)
            continue;
        int wi = value_slot[r->value];
        if (wi < 0) {
            viol(c, V_READ_UNKNOWN, "%s", desc(h, r, b1, sizeof b1));
            continue;
        }
        struct lz_op *v = &ops[wi];
        if (v->cls == C_REJ) {
            viol(c, V_READ_REJECTED, "%s read the value of %s", desc(h, r, b1, sizeof b1),
                 desc(h, v, b2, sizeof b2));
            continue;
        }
        if (v->cls == C_NOEFF) {
            viol(c, V_READ_NOEFFECT, "%s read the value of %s", desc(h, r, b1, sizeof b1),
                 desc(h, v, b2, sizeof b2));
            continue;
        }
        if (r->fence != v->token)
            viol(c, V_READ_FENCE, "%s: the value is of %s", desc(h, r, b1, sizeof b1),
                 desc(h, v, b2, sizeof b2));
        if (r->resp < v->inv) {
            viol(c, V_READ_FUTURE, "%s returned before %s was invoked", desc(h, r, b1, sizeof b1),
                 desc(h, v, b2, sizeof b2));
            continue;
        }
        /* A commit that must take effect after v, returned before r began. */
        size_t u = upper(acc, nacc, ops, v->token);
        const struct lz_op *later = NULL;
        if (u < nacc && ops[acc[suf[u]]].resp < r->inv)
            later = &ops[acc[suf[u]]];
        for (size_t j = 0; !later && v->cls == C_ACC && j < nacc; j++) {
            const struct lz_op *a = &ops[acc[j]];
            if (a->token == v->token && a->inv > v->resp && a->resp < r->inv)
                later = a;
        }
        if (later) {
            viol(c, V_READ_STALE, "%s read the value of %s after %s had returned",
                 desc(h, r, b1, sizeof b1), desc(h, v, b2, sizeof b2),
                 desc(h, later, b3, sizeof b3));
            continue;
        }
        v->seen = true;
        if (r->inv > v->read_maxinv)
            v->read_maxinv = r->inv;
        if (r->resp < v->read_minresp)
            v->read_minresp = r->resp;
    }

    /* The search: token groups in order, the earliest time the next
     * commit may take effect carried from one to the next. */
    uint64_t t = t0;
    const char *t_why = t0 ? "after an ENOENT read was invoked" : "the start";
    size_t *gm = malloc((nw + 1) * sizeof *gm);
    if (!gm)
        abort();
    for (size_t i = 0; i < nw;) {
        size_t j = i;
        while (j < nw && ops[w[j]].token == ops[w[i]].token)
            j++;
        struct grp g = {.m = gm, .n = 0, .rej_minresp = NONE, .rej_maxinv = 0, .rej_op = -1};
        uint64_t tok = ops[w[i]].token;
        for (size_t k = 0; k < h->n; k++) {
            const struct lz_op *x = &ops[k];
            if (x->kind == OP_COMMIT && x->rec == rec && x->cls == C_REJ && x->acc == tok) {
                g.has_rej = true;
                if (x->resp < g.rej_minresp)
                    g.rej_minresp = x->resp;
                if (x->inv > g.rej_maxinv)
                    g.rej_maxinv = x->inv;
            }
        }
        struct dfs d = {.ops = ops, .g = &g, .best = NONE};
        /* Members in invocation order; unknown commits nobody saw are optional
         * (at most 12 members: one lease's commits to one record). */
        for (size_t k = i; k < j; k++) {
            const struct lz_op *o = &ops[w[k]];
            bool req = o->cls == C_ACC || o->seen;
            if (g.n < 12 || req) {
                if (g.n == 16)
                    break;
                d.required[g.n] = req;
                g.m[g.n++] = w[k];
            }
        }
        bool any_required = false;
        for (int k = 0; k < g.n; k++)
            any_required |= d.required[k];
        if (any_required || g.has_rej) {
            dfs(&d, 0, 0, t);
            if (d.best == NONE) {
                explain(c, &g, t, t_why);
            } else {
                t = d.best;
                t_why = "the commits before it, and the reads and rejections that saw them";
            }
        }
        i = j;
    }
    free(gm);
    free(suf);
    for (size_t i = 0; i < h->n; i++)
        if (ops[i].kind == OP_COMMIT && ops[i].rec == rec && ops[i].value >= 0)
            value_slot[ops[i].value] = -1;
    free(w);
    free(acc);
}

long lz_check(lz_history *h, FILE *out, int show)
{
    struct ck c = {.h = h, .out = out, .show = show};
    h->t0 = NONE;
    for (size_t i = 0; i < h->n; i++)
        if (h->ops[i].inv < h->t0)
            h->t0 = h->ops[i].inv;
    if (h->bad_lines) {
        c.count[V_BAD] += h->bad_lines;
        fprintf(out, "VIOLATION bad-history: %ld bad line(s), the first: %s\n", h->bad_lines,
                h->bad_first);
    }
    /* Clients are sequential: overlapping operations of one client mean the
     * history was written wrong. */
    bool *key_seen = calloc(h->nnames + 1, sizeof *key_seen);
    bool *rec_seen = calloc(h->nnames + 1, sizeof *rec_seen);
    int *value_slot = malloc((h->nnames + 1) * sizeof *value_slot);
    if (!key_seen || !rec_seen || !value_slot)
        abort();
    for (size_t i = 0; i <= h->nnames; i++)
        value_slot[i] = -1;
    long counts[4] = {0};
    for (size_t i = 0; i < h->n; i++) {
        counts[h->ops[i].kind]++;
        if (h->ops[i].key >= 0)
            key_seen[h->ops[i].key] = true;
        if (h->ops[i].rec >= 0)
            rec_seen[h->ops[i].rec] = true;
    }
    long keys = 0, recs = 0;
    for (size_t id = 0; id < h->nnames; id++) {
        if (key_seen[id]) {
            keys++;
            check_key(&c, (int)id);
        }
        if (rec_seen[id]) {
            recs++;
            check_record(&c, (int)id, value_slot);
        }
    }
    long maybe = 0, rej = 0, acc = 0;
    for (size_t i = 0; i < h->n; i++)
        if (h->ops[i].kind == OP_COMMIT) {
            maybe += h->ops[i].cls == C_MAYBE;
            rej += h->ops[i].cls == C_REJ;
            acc += h->ops[i].cls == C_ACC;
        }
    free(key_seen);
    free(rec_seen);
    free(value_slot);
    long total = 0;
    for (int v = 0; v < V_N; v++)
        total += c.count[v];
    fprintf(out,
            "linearizability check: %zu operations (%ld acquire, %ld commit: %ld accepted, %ld "
            "rejected, %ld unknown; %ld read, %ld release), %ld keys, %ld records\n",
            h->n, counts[OP_ACQ], counts[OP_COMMIT], acc, rej, maybe, counts[OP_READ],
            counts[OP_REL], keys, recs);
    for (int v = 0; v < V_N; v++)
        if (c.count[v])
            fprintf(out, "  %-18s %ld\n", vname[v], c.count[v]);
    fprintf(out, "%s: %ld violation(s)\n", total ? "FAILED" : "OK", total);
    return total;
}
