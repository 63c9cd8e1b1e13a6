/* test_soak.c - the soak test: many random forest operations on a tiny random-weight
 * model, the forest checked after every one.
 *
 * Operations, drawn with weights (table `ops`): add a root chain, append or fork a chain
 * under a live node, a step (then greedy growth of the scored leaves), an exactness check,
 * pruning a node (a root too), the prune policies, flags/tags/log-probabilities, the
 * exact merge of random nodes, compaction, a cancelled plan, and a save/load round trip;
 * and hostile-but-legal ones: stale and forged ids for every call that takes an id,
 * empty chains, a merge across trees, filling the cache past full (the step must refuse
 * with ST_NO_KV_SLOT and change nothing) and exactly to full.
 *
 * After every operation the forest is walked through its public API by a checker of this
 * file (forest_check is called too, but not trusted): links agree both ways, parents
 * precede children in DFS order, depth(child) = depth(parent) + 1, no computed node under
 * a pending one, every computed node owns exactly one used slot, no slot is owned twice,
 * no used slot is unowned (pruned nodes' slots are free), stale ids read as stale. It is
 * then compared with a shadow copy the test keeps of what each operation should have done
 * (tokens, parents, depths, states, slots, flags, tags, log-probabilities). Every step's
 * plan is checked (rows, order, positions, slots, each row's attention segments equal its
 * path's slots root first, which rows return logits). Exactness: a leaf's logits from the
 * forest are bitwise those of decoding its path alone (t_linear), after steps, re-scoring,
 * compaction and reloading.
 *
 * Usage: test_soak [OPS [SEED]], or MD_SOAK_OPS / MD_SOAK_SEED. The seed is printed, and
 * the first failing operation stops the run and prints the command that replays it.
 * `make soak` runs 100,000 operations under ASan + UBSan. */
#include <time.h>

#include "base/array.h"
#include "forest/forest.h"
#include "strategy/merge.h"
#include "convert/mkmodel.h"
#include "forest/prune.h"
#include "session/session.h"
#include "forest/step.h"
#include "tok/tok.h"
#include "t.h"
#include "t_forest.h"
#include "t_model.h"

#define N_SLOTS 256
#define TOP_K 4
#define MAX_CHAIN 24
#define LIVE_CAP (N_SLOTS * 3 / 2) /* above this many nodes the next operation prunes a root */
#define N_STALE 64
#define DEFAULT_OPS 5000
#define ALL_FLAGS (FOREST_FINISHED | FOREST_BOOKMARK | FOREST_WANT_LOGITS | FOREST_NO_LOGITS)

enum { OP_ROOT, OP_APPEND, OP_STEP, OP_EXACT, OP_PRUNE, OP_POLICY, OP_FLAGS, OP_STALE,
       OP_EMPTY, OP_MERGE, OP_COMPACT, OP_CANCEL, OP_FILL, OP_SAVELOAD, OP_N };

static const struct { const char *name; int32_t weight; } ops[OP_N] = {
    [OP_ROOT] = {"root", 4},       [OP_APPEND] = {"append", 14}, [OP_STEP] = {"step", 20},
    [OP_EXACT] = {"exact", 5},     [OP_PRUNE] = {"prune", 8},    [OP_POLICY] = {"policy", 4},
    [OP_FLAGS] = {"flags", 5},     [OP_STALE] = {"stale", 6},    [OP_EMPTY] = {"empty", 2},
    [OP_MERGE] = {"merge", 4},     [OP_COMPACT] = {"compact", 3}, [OP_CANCEL] = {"cancel", 2},
    [OP_FILL] = {"fill", 2},       [OP_SAVELOAD] = {"saveload", 1},
};

/* What the test expects of one forest index. */
typedef struct shadow {
    uint8_t live, used, computed, flags; /* used: the index held a node before */
    uint16_t tag;
    uint32_t gen;
    int32_t parent, token, depth, slot;
    float lp;
} shadow;

typedef struct soak {
    uint64_t rs; /* PRNG state */
    const model *m;
    tok *tk;
    model_ctx *c, *lc; /* the forest's cache; the linear reference's */
    forest *f;
    step_plan plan;
    shadow *sh;
    int32_t cap_sh, V;
    forest_id stale[N_STALE]; /* ids of pruned nodes */
    int32_t n_stale;
    float *ref;   /* (V) */
    int32_t *tmp; /* (N_SLOTS * 8) paths, tokens */
    char file[96];
    long n_ok[OP_N], n_refused[OP_N], n_exact;
    double sum_live, sum_used, sum_rows; /* for the averages printed at the end */
    long n_steps, n_merge_cross, n_merge_empty;
    char why[512]; /* the first violation a check found */
} soak;

/* ---- helpers ---- */

static uint64_t rnd64(soak *s) { /* splitmix64 */
    uint64_t z = (s->rs += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int32_t rnd(soak *s, int32_t n) { return n > 0 ? (int32_t)(rnd64(s) % (uint64_t)n) : 0; }

/* Records the first violation in s->why; false, so checks read `return FAIL(...)`. */
#define FAIL(...) t_forest_fail(s->why, sizeof s->why, __VA_ARGS__)

static int32_t n_slots_used(soak *s) { return kv_alloc_used(forest_kv(s->f)); }

static void sh_fit(soak *s) {
    int32_t cap = forest_capacity(s->f);
    if (cap <= s->cap_sh) return;
    s->sh = realloc(s->sh, sizeof *s->sh * (size_t)cap);
    memset(s->sh + s->cap_sh, 0, sizeof *s->sh * (size_t)(cap - s->cap_sh));
    s->cap_sh = cap;
}

static forest_id sh_id(const soak *s, int32_t i) { return ((uint64_t)s->sh[i].gen << 32) | (uint32_t)i; }

/* A random live index (-1 when the forest is empty); computed_only: a computed one. */
static int32_t pick_live(soak *s, bool computed_only) {
    int32_t n = s->cap_sh, start = rnd(s, n);
    for (int32_t k = 0; k < n; k++) {
        const shadow *x = &s->sh[(start + k) % n];
        if (x->live && (x->computed || !computed_only)) return (start + k) % n;
    }
    return -1;
}

/* Children counts of live shadow nodes into kids (cap_sh entries). */
static void sh_kids(const soak *s, int32_t *kids) {
    memset(kids, 0, sizeof *kids * (size_t)s->cap_sh);
    for (int32_t i = 0; i < s->cap_sh; i++)
        if (s->sh[i].live && s->sh[i].parent >= 0) kids[s->sh[i].parent]++;
}

/* Tokens of idx's root-to-node path from the shadow into s->tmp; returns its length. */
static int32_t sh_path(soak *s, int32_t idx) {
    int32_t n = 0;
    for (int32_t i = idx; i >= 0; i = s->sh[i].parent) n++;
    for (int32_t i = idx, k = n; i >= 0; i = s->sh[i].parent) s->tmp[--k] = s->sh[i].token;
    return n;
}

/* The shadow's deepest common ancestor of a and b, or -1 (different trees). */
static int32_t sh_common(const soak *s, int32_t a, int32_t b) {
    for (int32_t x = a; x >= 0; x = s->sh[x].parent)
        for (int32_t y = b; y >= 0; y = s->sh[y].parent)
            if (x == y) return x;
    return -1;
}

static void stale_push(soak *s, forest_id id) {
    s->stale[s->n_stale < N_STALE ? s->n_stale++ : rnd(s, N_STALE)] = id;
}

/* The chain of n nodes whose last is `last` was just added under parent (-1: a root) with
 * these tokens, log-probabilities (NULL: unscored) and first depth: into the shadow. */
static bool sh_add_chain(soak *s, forest_id last, int32_t parent, const int32_t *toks,
                         const float *lps, int32_t n, int32_t depth0) {
    sh_fit(s);
    int32_t idx = forest_index(last);
    for (int32_t k = n - 1; k >= 0; k--) {
        if (idx < 0 || idx >= s->cap_sh || s->sh[idx].live)
            return FAIL("chain node %d of %d: index %d is not a fresh one", k, n, idx);
        const forest_node *nd = forest_node_at(s->f, idx);
        if (s->sh[idx].used && nd->gen <= s->sh[idx].gen) /* else an old id reads as live */
            return FAIL("index %d reused with generation %u after %u", idx, nd->gen, s->sh[idx].gen);
        s->sh[idx] = (shadow){.live = 1, .used = 1, .gen = nd->gen, .parent = k ? nd->parent : parent,
                              .token = toks[k], .depth = depth0 + k, .slot = -1,
                              .lp = lps ? lps[k] : NAN};
        idx = nd->parent;
    }
    return idx == parent ? true : FAIL("the chain hangs under %d, not %d", idx, parent);
}

/* Removes idx's subtree from the shadow; returns (nodes, computed nodes) removed. */
static void sh_prune(soak *s, int32_t idx, int32_t *nodes, int32_t *computed) {
    int8_t *memo = calloc((size_t)s->cap_sh, 1); /* 1: in the subtree, 2: not */
    *nodes = *computed = 0;
    for (int32_t i = 0; i < s->cap_sh; i++) {
        if (!s->sh[i].live) continue;
        int32_t j = i;
        while (j >= 0 && j != idx && !memo[j]) j = s->sh[j].parent;
        int8_t in = (j == idx || (j >= 0 && memo[j] == 1)) ? 1 : 2;
        for (int32_t k = i; k >= 0 && k != j; k = s->sh[k].parent) memo[k] = in;
        if (j == idx) memo[idx] = 1;
    }
    for (int32_t i = 0; i < s->cap_sh; i++)
        if (s->sh[i].live && memo[i] == 1) {
            if (rnd(s, 4) == 0) stale_push(s, sh_id(s, i));
            (*nodes)++;
            *computed += s->sh[i].computed;
            s->sh[i].live = 0;
        }
    free(memo);
}

/* ---- the checker (t_forest.h walks the forest itself) ---- */

/* The forest equals the shadow. */
static bool check_shadow(soak *s) {
    sh_fit(s);
    int32_t cap = forest_capacity(s->f);
    for (int32_t i = 0; i < s->cap_sh; i++) {
        const shadow *x = &s->sh[i];
        forest_id id = i < cap ? forest_id_at(s->f, i) : FOREST_NONE;
        if (!x->live) {
            if (id != FOREST_NONE) return FAIL("node %d is live but should not be", i);
            continue;
        }
        const forest_node *n = forest_get(s->f, sh_id(s, i));
        if (!n) return FAIL("node %d (gen %u) should be live", i, x->gen);
        if (n->parent != x->parent || n->token != x->token || n->depth != x->depth ||
            (n->state == FOREST_COMPUTED) != x->computed || (x->computed && n->kv_slot != x->slot) ||
            n->flags != x->flags || n->tag != x->tag || memcmp(&n->logprob, &x->lp, sizeof x->lp))
            return FAIL("node %d: parent %d token %d depth %d state %d slot %d flags %d tag %d "
                        "lp %g; want %d %d %d computed %d slot %d flags %d tag %d lp %g", i,
                        n->parent, n->token, n->depth, n->state, n->kv_slot, n->flags, n->tag,
                        n->logprob, x->parent, x->token, x->depth, x->computed, x->slot,
                        x->flags, x->tag, x->lp);
    }
    return true;
}

/* ---- steps ---- */

/* The built plan against the shadow: the rows are the pending nodes and the flagged
 * computed ones, parents first, at their depths, in fresh or their own slots, each seeing
 * its path's slots root first; the logits rows are the (unflagged) leaves and the flagged. */
static bool check_plan(soak *s, int32_t used0) {
    const step_plan *p = &s->plan;
    int32_t n = s->cap_sh, want_rows = 0, fresh = 0;
    int32_t *row_of = malloc(sizeof *row_of * (size_t)n), *kids = malloc(sizeof *kids * (size_t)n);
    uint8_t *taken = calloc(N_SLOTS, 1);
    sh_kids(s, kids);
    for (int32_t i = 0; i < n; i++) {
        row_of[i] = -1;
        if (s->sh[i].live && s->sh[i].computed) taken[s->sh[i].slot] = 1;
        want_rows += s->sh[i].live && (!s->sh[i].computed || (s->sh[i].flags & FOREST_WANT_LOGITS));
    }
    bool ok = p->n_rows == want_rows || FAIL("plan: %d rows, want %d", p->n_rows, want_rows);
    for (int32_t r = 0; r < p->n_rows && ok; r++) {
        int32_t i = p->node[r];
        const shadow *x = i >= 0 && i < n ? &s->sh[i] : NULL;
        if (!x || !x->live || row_of[i] >= 0 || (x->computed && !(x->flags & FOREST_WANT_LOGITS)))
            { ok = FAIL("plan row %d: node %d should not be a row (or twice)", r, i); break; }
        row_of[i] = r;
        if (x->parent >= 0 && !s->sh[x->parent].computed && row_of[x->parent] < 0)
            ok = FAIL("plan row %d: its parent %d comes later", r, x->parent);
        else if (p->pos[r] != x->depth || p->tokens[r] != x->token)
            ok = FAIL("plan row %d: pos %d token %d, want %d %d", r, p->pos[r], p->tokens[r],
                      x->depth, x->token);
        else if (x->computed ? p->slot[r] != x->slot
                             : (p->slot[r] < 0 || p->slot[r] >= N_SLOTS || taken[p->slot[r]]))
            ok = FAIL("plan row %d: slot %d is taken or not its own", r, p->slot[r]);
        if (!x->computed && ok) taken[p->slot[r]] = 1, fresh++;
    }
    int32_t n_out = 0;
    for (int32_t r = 0; r < p->n_rows && ok; r++) {
        int32_t i = p->node[r], len = 0, k = 0;
        for (int32_t a = i; a >= 0; a = s->sh[a].parent) len++;
        for (int32_t a = i, q = len; a >= 0; a = s->sh[a].parent)
            s->tmp[--q] = row_of[a] >= 0 ? p->slot[row_of[a]] : s->sh[a].slot;
        for (int32_t g = p->seg_off[r]; g < p->seg_off[r + 1] && ok; g++)
            for (int32_t q = 0; q < p->segs[g].len && ok; q++, k++)
                if (p->segs[g].len <= 0 || k >= len || s->tmp[k] != p->segs[g].start + q)
                    ok = FAIL("plan row %d: attention slot %d is not its path's %d", r,
                              p->segs[g].start + q, k < len ? s->tmp[k] : -1);
        if (ok && k != len) ok = FAIL("plan row %d sees %d slots, its path has %d", r, k, len);
        const uint8_t fl = s->sh[i].flags;
        bool want = (kids[i] == 0 && !(fl & FOREST_NO_LOGITS)) || (fl & FOREST_WANT_LOGITS);
        if (ok && !p->want[r] != !want)
            ok = FAIL("plan row %d: returns logits %d, want %d", r, p->want[r], want);
        if (ok && want && (n_out >= p->n_out || p->out_node[n_out++] != sh_id(s, i)))
            ok = FAIL("plan row %d: not the next logits row", r);
    }
    if (ok && n_out != p->n_out) ok = FAIL("plan: %d logits rows, want %d", p->n_out, n_out);
    if (ok && n_slots_used(s) != used0 + fresh)
        ok = FAIL("plan holds %d slots, want %d", n_slots_used(s) - used0, fresh);
    free(row_of), free(kids), free(taken);
    return ok;
}

/* A step: plan, check the plan, run, and update the shadow. A refusal must come exactly
 * when the pending nodes outnumber the free slots, and change nothing. */
static st_code do_step(soak *s) {
    st_err err = {0};
    int32_t used0 = n_slots_used(s), pend = forest_n_pending(s->f), avail = N_SLOTS - used0;
    st_code rc = step_plan_build(s->f, &s->plan, &err);
    if (rc == ST_NO_KV_SLOT) {
        T_CHECK(pend > avail && !s->plan.active && n_slots_used(s) == used0,
                "a refused step: %d pending, %d free, %d used after: %s", pend, avail,
                n_slots_used(s), err.msg);
        return rc;
    }
    T_CHECK(rc == ST_OK && pend <= avail, "plan: %d pending, %d free: %s", pend, avail, err.msg);
    if (rc) return rc;
    T_CHECK(check_plan(s, used0), "%s", s->why);
    rc = step_run(s->f, &s->plan, s->c, &err);
    T_CHECK(rc == ST_OK, "step_run: %s", err.msg);
    if (rc) return rc;
    s->n_steps++, s->sum_rows += s->plan.n_rows;
    for (int32_t r = 0; r < s->plan.n_rows; r++) {
        shadow *x = &s->sh[s->plan.node[r]];
        if (!x->computed) x->flags &= (uint8_t)~FOREST_NO_LOGITS;
        x->flags &= (uint8_t)~FOREST_WANT_LOGITS;
        x->computed = 1;
        x->slot = s->plan.slot[r];
    }
    for (int32_t o = 0; o < s->plan.n_out; o++) { /* top-k: the row's best token first */
        int32_t ids[TOP_K], k = forest_topk(s->f, s->plan.out_node[o], ids, NULL, TOP_K);
        T_CHECK(k == TOP_K && ids[0] == sample_argmax(step_logits_of(&s->plan, s->plan.out_node[o]), s->V),
                "top-k of a scored node: %d stored", k);
    }
    return ST_OK;
}

/* Node idx's logits (from the last step) against decoding its path alone. */
static void check_exact(soak *s, int32_t idx) {
    const float *got = step_logits_of(&s->plan, sh_id(s, idx));
    int32_t n = sh_path(s, idx);
    T_CHECK(got && t_linear(s->lc, s->tmp, n, s->sh[idx].depth - n + 1, s->ref) == ST_OK &&
                !memcmp(got, s->ref, sizeof(float) * (size_t)s->V),
            "node %d (path of %d): the forest's logits are not bitwise linear decoding's", idx, n);
    s->n_exact++;
}

/* ---- operations: each returns true when it did its main action, false when refused ---- */

static void rand_chain(soak *s, int32_t n, int32_t *toks, float *lps) {
    for (int32_t i = 0; i < n; i++) {
        toks[i] = rnd(s, s->V);
        lps[i] = -(float)rnd(s, 1 << 20) / 65536.0f;
    }
}

static bool op_root(soak *s) {
    int32_t n = 1 + rnd(s, MAX_CHAIN), pos0 = rnd(s, 3) ? 0 : rnd(s, 300), toks[MAX_CHAIN];
    float lps[MAX_CHAIN];
    rand_chain(s, n, toks, lps);
    forest_id last;
    st_err err = {0};
    T_CHECK(forest_add_root(s->f, toks, NULL, n, pos0, &last, &err) == ST_OK, "root: %s", err.msg);
    return sh_add_chain(s, last, -1, toks, NULL, n, pos0);
}

static bool op_append(soak *s) {
    int32_t at = pick_live(s, false), n = 1 + rnd(s, MAX_CHAIN), toks[MAX_CHAIN];
    if (at < 0) return op_root(s);
    float lps[MAX_CHAIN];
    rand_chain(s, n, toks, lps);
    bool scored = rnd(s, 2);
    forest_id last;
    st_err err = {0};
    T_CHECK(forest_append(s->f, sh_id(s, at), toks, scored ? lps : NULL, n, &last, &err) == ST_OK,
            "append: %s", err.msg);
    return sh_add_chain(s, last, at, toks, scored ? lps : NULL, n, s->sh[at].depth + 1);
}

/* A step, then sometimes an exactness check of one logits row, then greedy growth of the
 * scored leaves (a second, random child now and then: a fork). */
static bool op_step(soak *s) {
    if (do_step(s) != ST_OK) return false;
    const step_plan *p = &s->plan;
    if (p->n_out && rnd(s, 3) == 0) check_exact(s, forest_index(p->out_node[rnd(s, p->n_out)]));
    if (rnd(s, 3) == 0) return true;
    for (int32_t o = 0; o < p->n_out && o < 16; o++) {
        forest_id id = p->out_node[o];
        if (forest_n_children(s->f, id) > 0) continue;
        int32_t t[2] = {sample_argmax(step_logits_of(p, id), s->V), rnd(s, s->V)};
        for (int32_t k = 0; k < (rnd(s, 4) ? 1 : 2); k++) {
            float lp = step_logprob_of(&s->plan, id, t[k]);
            forest_id last;
            st_err err = {0};
            T_CHECK(forest_append(s->f, id, &t[k], &lp, 1, &last, &err) == ST_OK, "grow: %s", err.msg);
            if (!sh_add_chain(s, last, forest_index(id), &t[k], &lp, 1, s->sh[forest_index(id)].depth + 1))
                return true;
        }
    }
    return true;
}

/* Re-scores a random computed node (FOREST_WANT_LOGITS) and checks it, and other rows. */
static bool op_exact(soak *s) {
    int32_t idx = pick_live(s, true);
    if (idx < 0) return false;
    forest_set_flags(s->f, sh_id(s, idx), FOREST_WANT_LOGITS, 0);
    s->sh[idx].flags |= FOREST_WANT_LOGITS;
    if (do_step(s) != ST_OK) {
        forest_set_flags(s->f, sh_id(s, idx), 0, FOREST_WANT_LOGITS);
        s->sh[idx].flags &= (uint8_t)~FOREST_WANT_LOGITS;
        return false;
    }
    check_exact(s, idx);
    if (s->plan.n_out > 1) check_exact(s, forest_index(s->plan.out_node[rnd(s, s->plan.n_out)]));
    return true;
}

static bool prune_at(soak *s, int32_t idx) {
    int32_t live0 = forest_n_live(s->f), used0 = n_slots_used(s), nodes, comp;
    forest_id id = sh_id(s, idx);
    st_err err = {0};
    T_CHECK(forest_prune(s->f, id, &err) == ST_OK, "prune: %s", err.msg);
    sh_prune(s, idx, &nodes, &comp);
    stale_push(s, id);
    T_CHECK(live0 - forest_n_live(s->f) == nodes && used0 - n_slots_used(s) == comp,
            "prune removed %d nodes and %d slots, want %d and %d", live0 - forest_n_live(s->f),
            used0 - n_slots_used(s), nodes, comp);
    return true;
}

static bool op_prune(soak *s) {
    forest_id roots[8];
    int32_t nr = forest_roots(s->f, roots, 8);
    if (nr > 0 && rnd(s, 4) == 0) return prune_at(s, forest_index(roots[rnd(s, nr < 8 ? nr : 8)]));
    int32_t idx = pick_live(s, false);
    return idx >= 0 && prune_at(s, idx);
}

/* The prune policies; the shadow follows what they removed, which must be whole subtrees,
 * never prompt text when protected, and what their stats say. */
static bool op_policy(soak *s) {
    prune_params pp = prune_default_params();
    pp.score = rnd(s, 2) ? PRUNE_SCORE_SUM : PRUNE_SCORE_MEAN;
    pp.keep_prompts = rnd(s, 4) != 0;
    int32_t kind = rnd(s, 3), arg = kind == 0 ? rnd(s, 6) : rnd(s, n_slots_used(s) + 1);
    int32_t live0 = forest_n_live(s->f), used0 = n_slots_used(s), cands0 = 0, cands = 0;
    forest_id *lv = malloc(sizeof *lv * (size_t)(live0 + 1));
    int32_t nl = forest_leaves(s->f, lv, live0);
    for (int32_t i = 0; i < nl; i++) cands0 += !pp.keep_prompts || !isnan(forest_get(s->f, lv[i])->logprob);
    prune_stats st = {0};
    st_err err = {0};
    st_code rc = kind == 0 ? prune_keep_top(s->f, arg, &pp, &st, &err)
                 : kind == 1 ? prune_finished(s->f, &pp, &st, &err)
                             : prune_kv_cap(s->f, arg, &pp, &st, &err);
    T_CHECK(rc == ST_OK || (kind == 2 && rc == ST_NO_KV_SLOT && forest_n_live(s->f) == live0),
            "prune policy %d: %s", kind, err.msg);
    int32_t gone = 0, comp = 0;
    for (int32_t i = 0; i < s->cap_sh; i++) {
        shadow *x = &s->sh[i];
        if (!x->live || forest_get(s->f, sh_id(s, i))) continue;
        T_CHECK(!pp.keep_prompts || !isnan(x->lp), "policy %d removed prompt node %d", kind, i);
        x->live = 0, gone++, comp += x->computed;
        if (rnd(s, 8) == 0) stale_push(s, sh_id(s, i));
    }
    for (int32_t i = 0; i < s->cap_sh; i++) /* removed: whole subtrees */
        T_CHECK(!s->sh[i].live || s->sh[i].parent < 0 || s->sh[s->sh[i].parent].live,
                "policy %d removed the parent of live node %d", kind, i);
    if (rc == ST_OK)
        T_CHECK(st.nodes == gone && st.slots == comp && used0 - n_slots_used(s) == comp,
                "policy %d stats: %d nodes %d slots, want %d %d", kind, st.nodes, st.slots, gone, comp);
    nl = forest_leaves(s->f, lv, live0);
    int32_t finished = 0;
    for (int32_t i = 0; i < nl; i++) {
        const forest_node *nd = forest_get(s->f, lv[i]);
        bool cand = !pp.keep_prompts || !isnan(nd->logprob);
        cands += cand;
        finished += cand && (nd->flags & FOREST_FINISHED);
    }
    if (kind == 1) T_CHECK(finished == 0, "prune_finished left %d finished leaves", finished);
    if (kind == 0)
        T_CHECK(cands == (cands0 < arg ? cands0 : arg), "keep_top %d: %d of %d candidates left",
                arg, cands, cands0);
    if (kind == 2 && rc == ST_OK)
        T_CHECK(n_slots_used(s) <= arg, "kv_cap %d: %d used", arg, n_slots_used(s));
    free(lv);
    return rc == ST_OK;
}

static bool op_flags(soak *s) {
    int32_t idx = pick_live(s, false);
    if (idx < 0) return false;
    forest_id id = sh_id(s, idx);
    uint8_t set = (uint8_t)(rnd(s, 16) & ALL_FLAGS), clear = (uint8_t)(rnd(s, 16) & ALL_FLAGS);
    T_CHECK(forest_set_flags(s->f, id, set, clear), "set flags of a live node");
    s->sh[idx].flags = (uint8_t)((s->sh[idx].flags & ~clear) | set);
    if (rnd(s, 4) == 0) {
        uint16_t tag = (uint16_t)rnd(s, 65536);
        T_CHECK(forest_set_tag(s->f, id, tag), "set the tag of a live node");
        s->sh[idx].tag = tag;
    }
    if (rnd(s, 4) == 0) {
        float lp = rnd(s, 3) ? -(float)rnd(s, 1000) / 100.0f : NAN;
        T_CHECK(forest_set_logprob(s->f, id, lp), "set the logprob of a live node");
        s->sh[idx].lp = lp;
    }
    return true;
}

/* Stale and forged ids: every call refuses them and changes nothing (the shadow check). */
static bool op_stale(soak *s) {
    int32_t idx = pick_live(s, false), t = 3, cap = forest_capacity(s->f);
    forest_id id, live = idx >= 0 ? sh_id(s, idx) : FOREST_NONE;
    switch (s->n_stale ? rnd(s, 6) : 1 + rnd(s, 5)) {
    case 0: id = s->stale[rnd(s, s->n_stale)]; break;
    case 1: id = FOREST_NONE; break;
    case 2: id = (uint64_t)rnd(s, 1000) << 32 | (uint32_t)(cap + rnd(s, 1000)); break;
    case 3: id = idx >= 0 ? live + (1ULL << 32) : FOREST_NONE; break; /* a future generation */
    default: id = ((uint64_t)rnd(s, 4) << 32) | (uint32_t)rnd(s, cap + 1); /* anything */
    }
    if (forest_get(s->f, id)) return false; /* guessed a live one: not stale */
    st_err err = {0};
    forest_id out[2] = {id, live};
    int32_t ids[TOP_K];
    T_CHECK(forest_append(s->f, id, &t, NULL, 1, NULL, &err) == ST_ERR_ARG, "append under a stale id");
    T_CHECK(forest_prune(s->f, id, &err) == ST_ERR_ARG, "prune a stale id");
    T_CHECK(!forest_set_flags(s->f, id, FOREST_BOOKMARK, 0) && !forest_set_tag(s->f, id, 1) &&
                !forest_set_logprob(s->f, id, -1), "set flags/tag/logprob of a stale id");
    T_CHECK(forest_path(s->f, id, s->tmp, N_SLOTS) == -1 && forest_topk(s->f, id, ids, NULL, TOP_K) == 0 &&
                forest_n_children(s->f, id) == 0 && isnan(prune_score(s->f, id, PRUNE_SCORE_SUM)) &&
                forest_common_ancestor(s->f, id, live) == FOREST_NONE,
            "queries of a stale id");
    T_CHECK(merge_branches(s->f, s->tk, out, live == FOREST_NONE ? 1 : 2, NULL, NULL, &err) == ST_ERR_ARG,
            "merge with a stale id");
    return true;
}

/* Chains of no tokens, negative lengths and positions: refused, nothing changes. */
static bool op_empty(soak *s) {
    int32_t t = 1, idx = pick_live(s, false);
    st_err err = {0};
    T_CHECK(forest_add_root(s->f, &t, NULL, 0, 0, NULL, &err) == ST_ERR_ARG, "an empty root");
    T_CHECK(forest_add_root(s->f, &t, NULL, 1, -1, NULL, &err) == ST_ERR_ARG, "a negative position");
    if (idx >= 0)
        T_CHECK(forest_append(s->f, sh_id(s, idx), &t, NULL, rnd(s, 2) ? 0 : -3, NULL, &err) == ST_ERR_ARG,
                "an empty chain");
    return true;
}

/* The exact merge of 1-3 random nodes (across trees now and then: refused); the chain
 * under their common ancestor is the tokenisation of the joined texts. */
static bool op_merge(soak *s) {
    forest_id ids[3], roots[2];
    int32_t n = rnd(s, 4) ? 2 + rnd(s, 2) : 1, anc = -1; /* one alone: an empty text */
    for (int32_t k = 0; k < n; k++) {
        int32_t idx = pick_live(s, false);
        if (idx < 0) return false;
        ids[k] = sh_id(s, idx);
        anc = k == 0 ? idx : anc >= 0 ? sh_common(s, anc, idx) : -1;
    }
    if (rnd(s, 5) == 0 && forest_roots(s->f, roots, 2) == 2) { /* likely two trees */
        ids[0] = roots[0], ids[1] = roots[1], n = 2, anc = -1;
    }
    st_err err = {0};
    forest_id last;
    int32_t live0 = forest_n_live(s->f);
    if (anc < 0) {
        T_CHECK(merge_branches(s->f, s->tk, ids, n, NULL, &last, &err) == ST_ERR_ARG &&
                    forest_n_live(s->f) == live0, "a merge across trees is refused: %s", err.msg);
        s->n_merge_cross++;
        return false;
    }
    char *text = merge_join_text(s->f, s->tk, NULL, ids, n, NULL, NULL, &err);
    int32_t nt = 0, *toks = text ? merge_encode(s->tk, text, &nt, &err) : NULL;
    st_code rc = merge_branches(s->f, s->tk, ids, n, NULL, &last, &err);
    bool ok = false;
    if (!toks || nt == 0) {
        T_CHECK(rc == ST_ERR_ARG && forest_n_live(s->f) == live0, "an empty merge is refused");
        s->n_merge_empty++;
    } else {
        T_CHECK(rc == ST_OK, "merge: %s", err.msg);
        ok = rc == ST_OK && sh_add_chain(s, last, anc, toks, NULL, nt, s->sh[anc].depth + 1);
    }
    free(text), free(toks);
    return ok;
}

/* Compaction: the computed nodes' slots become 0..n-1 in DFS order, one free run; then
 * a re-scored leaf shows the K/V moved with them. */
static bool op_compact(soak *s) {
    int32_t runs = kv_alloc_free_runs(forest_kv(s->f)), k = 0;
    st_err err = {0};
    T_CHECK(step_compact(s->f, s->c, &err) == ST_OK, "compact: %s", err.msg);
    for (int32_t i = forest_dfs_first(s->f); i >= 0; i = forest_dfs_next(s->f, i))
        if (s->sh[i].computed) s->sh[i].slot = k++;
    T_CHECK(kv_alloc_free_runs(forest_kv(s->f)) <= 1, "compaction left %d free runs (had %d)",
            kv_alloc_free_runs(forest_kv(s->f)), runs);
    if (rnd(s, 2)) op_exact(s);
    return runs > 1;
}

/* A plan built, checked and cancelled: its slots go back, nothing else changes. */
static bool op_cancel(soak *s) {
    int32_t used0 = n_slots_used(s), pend = forest_n_pending(s->f);
    st_err err = {0};
    st_code rc = step_plan_build(s->f, &s->plan, &err);
    T_CHECK(rc == ST_OK || (rc == ST_NO_KV_SLOT && pend > N_SLOTS - used0), "build: %s", err.msg);
    if (rc) return false;
    T_CHECK(check_plan(s, used0), "%s", s->why);
    step_plan_cancel(s->f, &s->plan);
    T_CHECK(!s->plan.active && n_slots_used(s) == used0, "cancel: %d slots used, had %d",
            n_slots_used(s), used0);
    return true;
}

/* A new root sized to overflow the cache (the step is refused; the root goes again) or
 * to fill it exactly (the step runs; one more token is then refused). */
static bool op_fill(soak *s) {
    bool exact = rnd(s, 2);
    int32_t len = N_SLOTS - n_slots_used(s) - forest_n_pending(s->f) + (exact ? 0 : 1 + rnd(s, 8));
    if (len < 1) return do_step(s) == ST_OK; /* already over: refused */
    int32_t *toks = malloc(sizeof *toks * (size_t)len);
    for (int32_t i = 0; i < len; i++) toks[i] = rnd(s, s->V);
    forest_id last;
    st_err err = {0};
    T_CHECK(forest_add_root(s->f, toks, NULL, len, 0, &last, &err) == ST_OK, "fill: %s", err.msg);
    bool ok = sh_add_chain(s, last, -1, toks, NULL, len, 0);
    int32_t root = forest_index(last);
    while (ok && s->sh[root].parent >= 0) root = s->sh[root].parent;
    free(toks);
    if (!ok) return false;
    st_code rc = do_step(s);
    T_CHECK(exact ? rc == ST_OK && n_slots_used(s) == N_SLOTS : rc == ST_NO_KV_SLOT,
            "filling %s: step %d, %d used", exact ? "exactly" : "past full", rc, n_slots_used(s));
    if (exact && rc == ST_OK) {
        int32_t t = rnd(s, s->V), at = pick_live(s, false);
        T_CHECK(forest_append(s->f, sh_id(s, at), &t, NULL, 1, &last, &err) == ST_OK, "append: %s",
                err.msg);
        sh_add_chain(s, last, at, &t, NULL, 1, s->sh[at].depth + 1);
        T_CHECK(do_step(s) == ST_NO_KV_SLOT, "one token more than the cache holds is refused");
        prune_at(s, forest_index(last));
    }
    return prune_at(s, root); /* the new root goes again */
}

/* Save and load: the loaded forest has the same structure, tokens, log-probabilities,
 * flags, tags and top-k alternatives; recomputed, its leaves get bitwise the logits they
 * had before saving. The loaded forest then replaces the old one. */
static bool op_saveload(soak *s) {
    forest *f = s->f;
    int32_t nl = forest_leaves(f, NULL, 0), live = forest_n_live(f), cap = forest_capacity(f);
    forest_id *lv = malloc(sizeof *lv * (size_t)(nl + 1));
    forest_leaves(f, lv, nl);
    for (int32_t i = 0; i < nl; i++) {
        forest_set_flags(f, lv[i], FOREST_WANT_LOGITS, 0);
        s->sh[forest_index(lv[i])].flags |= FOREST_WANT_LOGITS;
    }
    bool scored = do_step(s) == ST_OK;
    float *before = malloc(sizeof(float) * (size_t)s->V * (size_t)(nl + 1));
    for (int32_t i = 0; i < nl; i++) {
        const float *lg = scored ? step_logits_of(&s->plan, lv[i]) : NULL;
        if (lg) memcpy(before + (size_t)i * s->V, lg, sizeof(float) * (size_t)s->V);
        T_CHECK(lg || !scored, "leaf %d was re-scored", i);
        forest_set_flags(f, lv[i], 0, FOREST_WANT_LOGITS);
        s->sh[forest_index(lv[i])].flags &= (uint8_t)~FOREST_WANT_LOGITS;
    }
    /* the old forest in DFS order, with its top-k alternatives */
    int32_t *order = malloc(sizeof *order * (size_t)(live + 1));
    int32_t *pos_of = malloc(sizeof *pos_of * (size_t)(cap + 1));
    int32_t *tk_ids = malloc(sizeof *tk_ids * (size_t)(live + 1) * TOP_K);
    int32_t *tk_n = malloc(sizeof *tk_n * (size_t)(live + 1));
    float *tk_lp = malloc(sizeof *tk_lp * (size_t)(live + 1) * TOP_K);
    int32_t k = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0 && k < live; i = forest_dfs_next(f, i), k++) {
        order[k] = i, pos_of[i] = k;
        tk_n[k] = forest_topk(f, forest_id_at(f, i), tk_ids + k * TOP_K, tk_lp + k * TOP_K, TOP_K);
    }
    session_settings st = session_settings_default();
    session_load_params lp = session_load_default_params();
    lp.n_vocab = s->V;
    st_err err = {0};
    T_CHECK(session_save(s->file, f, &st, NULL, NULL, &err) == ST_OK, "save: %s", err.msg);
    forest *g = session_load(s->file, &lp, &st, NULL, &err);
    session_settings_free(&st);
    T_CHECK(g != NULL, "load: %s", err.msg);
    int32_t gcap = g ? forest_capacity(g) : 0, j, ids[TOP_K];
    float lps[TOP_K];
    shadow *nsh = calloc((size_t)gcap + 1, sizeof *nsh);
    int32_t *gpos = malloc(sizeof *gpos * ((size_t)gcap + 1));
    bool ok = g != NULL;
    for (k = 0, j = g ? forest_dfs_first(g) : -1; j >= 0 && ok; j = forest_dfs_next(g, j), k++) {
        const forest_node *b = forest_node_at(g, j);
        const shadow *a = k < live ? &s->sh[order[k]] : NULL;
        gpos[j] = k;
        int32_t n = forest_topk(g, forest_id_at(g, j), ids, lps, TOP_K);
        if (!a || b->token != a->token || b->depth != a->depth ||
            memcmp(&b->logprob, &a->lp, sizeof a->lp) ||
            b->flags != (a->flags & (FOREST_FINISHED | FOREST_BOOKMARK)) || b->tag != a->tag ||
            b->state != FOREST_PENDING ||
            (a->parent < 0 ? b->parent >= 0 : b->parent < 0 || gpos[b->parent] != pos_of[a->parent]))
            ok = FAIL("loaded node %d (DFS %d) differs from the saved one", j, k);
        else if (n != tk_n[k] || memcmp(ids, tk_ids + k * TOP_K, sizeof *ids * (size_t)n) ||
                 memcmp(lps, tk_lp + k * TOP_K, sizeof *lps * (size_t)n))
            ok = FAIL("loaded node %d (DFS %d): top-k differs", j, k);
        else
            nsh[j] = (shadow){.live = 1, .used = 1, .gen = b->gen, .parent = b->parent, .token = a->token,
                              .depth = a->depth, .slot = -1, .lp = a->lp, .tag = a->tag,
                              .flags = b->flags};
    }
    T_CHECK(ok && k == live && forest_n_live(g) == live, "round trip: %d of %d nodes: %s", k, live, s->why);
    if (ok) { /* the loaded forest replaces the old one; its ids are new */
        forest_free(s->f);
        s->f = g, g = NULL;
        free(s->sh);
        s->sh = nsh, nsh = NULL;
        s->cap_sh = gcap;
        s->n_stale = 0;
    }
    if (ok && scored) {
        T_CHECK(do_step(s) == ST_OK, "the loaded forest's step");
        T_CHECK(forest_leaves(s->f, lv, nl) == nl, "as many leaves after loading");
        for (int32_t i = 0; i < nl; i++) {
            const float *lg = step_logits_of(&s->plan, lv[i]);
            T_CHECK(lg && !memcmp(lg, before + (size_t)i * s->V, sizeof(float) * (size_t)s->V),
                    "leaf %d: the logits after loading are not bitwise those before saving", i);
        }
        k = 0;
        for (j = forest_dfs_first(s->f); j >= 0 && k < live; j = forest_dfs_next(s->f, j), k++) {
            int32_t n = forest_topk(s->f, forest_id_at(s->f, j), ids, lps, TOP_K);
            T_CHECK(n == tk_n[k] && !memcmp(ids, tk_ids + k * TOP_K, sizeof *ids * (size_t)n) &&
                        !memcmp(lps, tk_lp + k * TOP_K, sizeof *lps * (size_t)n),
                    "node %d: top-k after the recomputation differs", j);
        }
    }
    forest_free(g);
    free(nsh), free(gpos), free(lv), free(before), free(order), free(pos_of);
    free(tk_ids), free(tk_n), free(tk_lp);
    return ok && scored;
}

/* ---- main ---- */

static int32_t choose(soak *s) {
    if (forest_n_live(s->f) > LIVE_CAP) return OP_PRUNE;
    int32_t total = 0;
    for (int32_t k = 0; k < OP_N; k++) total += ops[k].weight;
    int32_t x = rnd(s, total), k = 0;
    while (x >= ops[k].weight) x -= ops[k++].weight;
    return k;
}

static bool (*const op_fn[OP_N])(soak *) = {
    [OP_ROOT] = op_root,     [OP_APPEND] = op_append, [OP_STEP] = op_step,
    [OP_EXACT] = op_exact,   [OP_PRUNE] = op_prune,   [OP_POLICY] = op_policy,
    [OP_FLAGS] = op_flags,   [OP_STALE] = op_stale,   [OP_EMPTY] = op_empty,
    [OP_MERGE] = op_merge,   [OP_COMPACT] = op_compact, [OP_CANCEL] = op_cancel,
    [OP_FILL] = op_fill,     [OP_SAVELOAD] = op_saveload,
};

int main(int argc, char **argv) {
    const char *e_ops = getenv("MD_SOAK_OPS"), *e_seed = getenv("MD_SOAK_SEED");
    long n_ops = argc > 1 ? atol(argv[1]) : e_ops ? atol(e_ops) : DEFAULT_OPS;
    unsigned long long seed = argc > 2 ? strtoull(argv[2], NULL, 0)
                              : e_seed ? strtoull(e_seed, NULL, 0) : 1;
    fprintf(stderr, "test_soak: %ld operations, seed %llu (replay: test_soak %ld %llu)\n", n_ops,
            seed, n_ops, seed);
    soak s = {.rs = seed};
    st_err err = {0};
    mkmodel_params mp = mkmodel_default_params();
    model *m = t_random_model(&mp, &err);
    s.tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(s.tk != NULL, "the tiny model and its tokenizer: %s", err.msg);
    if (!s.tk) return t_done();
    s.m = m;
    s.V = m->hp.n_vocab;
    s.c = t_new_ctx_rows(m, N_SLOTS, 32);
    s.lc = t_new_ctx_rows(m, N_SLOTS, 32);
    s.f = forest_init(N_SLOTS, TOP_K);
    s.ref = malloc(sizeof(float) * (size_t)s.V);
    s.tmp = malloc(sizeof(int32_t) * N_SLOTS * 8);
    snprintf(s.file, sizeof s.file, "/tmp/md_soak_%ld.json", (long)getpid());
    step_plan_init(&s.plan);
    double t0 = mono_now_s();
    long op;
    for (op = 0; op < n_ops; op++) {
        int fails = t_fail;
        int32_t k = choose(&s);
        s.why[0] = 0;
        bool done = op_fn[k](&s);
        s.n_ok[k] += done, s.n_refused[k] += !done;
        s.sum_live += forest_n_live(s.f), s.sum_used += n_slots_used(&s);
        if (t_fail == fails)
            T_CHECK(!s.why[0] && t_forest_walk(s.f, (uint32_t)rnd64(&s), s.why, sizeof s.why) &&
                        check_shadow(&s), "%s", s.why);
        if (t_fail != fails) {
            fprintf(stderr, "test_soak: operation %ld (%s) failed; replay: test_soak %ld %llu\n",
                    op, ops[k].name, op + 1, seed);
            break;
        }
    }
    double sec = mono_now_s() - t0;
    fprintf(stderr, "test_soak: %ld operations in %.2f s (%.0f ops/s), %ld exactness checks; "
            "done/refused:", op, sec, op / (sec > 0 ? sec : 1), s.n_exact);
    for (int32_t k = 0; k < OP_N; k++)
        fprintf(stderr, " %s %ld/%ld", ops[k].name, s.n_ok[k], s.n_refused[k]);
    fprintf(stderr, "\ntest_soak: on average %.0f nodes, %.0f of %d slots used, %.1f rows a step "
            "(%ld steps); merges refused: %ld across trees, %ld empty\n", s.sum_live / (op ? op : 1),
            s.sum_used / (op ? op : 1), N_SLOTS, s.sum_rows / (s.n_steps ? s.n_steps : 1), s.n_steps,
            s.n_merge_cross, s.n_merge_empty);
    unlink(s.file);
    step_plan_free(&s.plan);
    forest_free(s.f);
    model_ctx_free(s.c);
    model_ctx_free(s.lc);
    tok_free(s.tk);
    model_free(m);
    free(s.sh), free(s.ref), free(s.tmp);
    return t_done();
}
