/* cmd_plan.c - `multidecode plan`: shows, step by step, how the engine packs a forest into
 * one batch (teaching).
 *
 * The forest: one root chain per -p prompt (sharing nothing), or with --context a shared
 * context chain with every -p continuing under it. Each step is run by the grow strategy
 * (engine/strategy/strategy.h) with --branches k sampled branches per prompt; the first step computes
 * the prompts (prefill), each later one the branches' newest tokens. For every step this
 * prints the plan the step ran: the packed order (row, node id, parent id, token text,
 * RoPE position, KV slot, whether the row returns logits) and the attention mask as a grid
 * (rows = the step's queries, columns = every KV slot some row may see, '#' where the row
 * may attend), then the tokens the branches sampled from it. --json gives the same as one
 * JSON object. Node ids are the forest's array indices (stable for the whole run).
 *
 * With --lookahead W,N,G (or --draft) the steps are those of exact speculative greedy
 * decoding (sampling with --temp; the draft / lookahead strategies, engine/spec/spec.h)
 * from the prompt instead: each plan
 * shows the tip, the draft tree and lookahead decoding's window (level l, column i at
 * position tip + i + l) with their roles, then the tokens the step accepted.
 *
 * On a model with sliding-window layers (or with --window forcing one on, to see what a
 * window does) the grid is a windowed layer's mask: ':' marks a row's ancestors outside
 * its window, which only the global layers see, apart from '.', slots that are not its
 * ancestors; JSON gives each row's windowed slots too. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forest/forest.h"
#include "strategy/strategy.h"
#include "spec/spec.h"
#include "forest/step.h"
#include "app.h"
#include "json_out.h"
#include "../ui/mask_view.h"
#include "../ui/svg.h"
#include "prompt.h"
#include "spec_opts.h"
#include "strategy_run.h"

#define PLAN_MAX_PROMPTS 64

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define PLAN_USAGE "usage: multidecode plan -m MODEL -p PROMPT [-p PROMPT2 ...] [options]"

static void plan_usage(FILE *f) {
    fprintf(f,
            PLAN_USAGE "\n\n"
            PROMPT_MODEL_HELP
            "  -p, --prompt TEXT    a prompt: one tree each, or a branch under --context\n"
            "                       (repeat up to %d times; default: BOS alone)\n"
            "      --context TEXT   a shared context chain that every prompt continues\n"
            "  -k, --branches K     sampled branches grown from each prompt (default 2);\n"
            "                       one prompt's start with K distinct tokens (greedy: its\n"
            "                       K most likely), so that the forks differ\n"
            "  -s, --steps N        forest steps to run and show, the prefill included\n"
            "                       (default 3)\n"
            "      --max-cols N     widest mask grid drawn; wider ones show their last N\n"
            "                       columns (default 120)\n"
            "      --json           one JSON object instead of tables\n"
            "      --window N[,P]   pretend the model attends within a sliding window of N\n"
            "                       keys on every layer, or on all but each P-th (to see how\n"
            "                       a window cuts the mask; a model trained without one\n"
            "                       predicts worse with it)\n"
            "      --svg FILE       a picture for slides: the forest as a tree (tokens, RoPE\n"
            "                       positions, KV slots, probabilities) and the last step's\n"
            "                       attention mask, as SVG (--steps 1: the prefill's mask)\n"
            "      --svg-mask FILE  the last step's mask alone, as SVG\n"
            "      --slide FILE     --svg as a 16:9 slide: the shared prompt folded into one\n"
            "                       box, whole tokens, the mask's columns named by token\n"
            "      --attn L[:H]     the attention weights of layer L, head H (default: the\n"
            "                       mean over the heads) on every seen cell: in tenths in\n"
            "                       the grid, as \"attention\" in --json, as shading in --svg\n"
            "                       (with --draft / --lookahead too: the grid and --json)\n"
            "      --temp T         temperature; 0 = greedy (default 0.8)\n"
            PROMPT_SAMPLE_HELP
            "With --draft or --lookahead, the steps of exact speculative greedy decoding\n"
            "(sampling with --temp) from the (single) prompt, each row labelled tip, draft\n"
            "or la L,I:\n"
            SPEC_HELP,
            PLAN_MAX_PROMPTS);
}

/* Tokens sampled during one step, for the report. */
typedef struct plan_sampled {
    int32_t *branch, *token;
    int32_t n;
} plan_sampled;

static void plan_emit(void *ud, int32_t branch, int32_t token, float logprob) {
    (void)logprob;
    plan_sampled *s = ud; /* sized for one token per branch per step */
    s->branch[s->n] = branch;
    s->token[s->n++] = token;
}

/* The distinct slots any row of the plan may see, in increasing order, into cols (of
 * n_slots entries, the KV cache's size); returns how many. Rows share most of their
 * slots, so cols first holds a flag per slot rather than every row's list. */
static int32_t plan_columns(const step_plan *p, int32_t n_slots, int32_t *cols) {
    memset(cols, 0, sizeof(int32_t) * (size_t)n_slots);
    for (int32_t i = 0; i < p->seg_off[p->n_rows]; i++) {
        ASSERT(p->segs[i].start >= 0 && p->segs[i].len <= n_slots - p->segs[i].start);
        for (int32_t s = p->segs[i].start; s < p->segs[i].start + p->segs[i].len; s++)
            cols[s] = 1;
    }
    int32_t m = 0;
    for (int32_t s = 0; s < n_slots; s++) /* m <= s: the list overwrites only read flags */
        if (cols[s]) cols[m++] = s;
    return m;
}

/* Text of node idx as it reads after its parent. */
static void node_text(const forest *f, const tok *tk, int32_t idx, char *out, size_t cap) {
    const forest_node *nd = forest_node_at(f, idx);
    int32_t prev = nd->parent >= 0 ? forest_node_at(f, nd->parent)->token : -1;
    prompt_token_text(tk, prev, nd->token, out, cap);
}

/* A row's role in a speculative step ("tip", "draft", "la L,I", "prompt"), or NULL in
 * grow mode. */
static const char *plan_role(const spec *sp, const forest *f, int32_t idx, char *buf, size_t cap) {
    if (!sp) return NULL;
    int32_t l = 0, i = 0;
    switch (spec_node_role(sp, forest_id_at(f, idx), &l, &i)) {
    case SPEC_NODE_TIP: return "tip";
    case SPEC_NODE_DRAFT: return "draft";
    case SPEC_NODE_WINDOW: snprintf(buf, cap, "la %d,%d", l, i); return buf;
    default: return "prompt";
    }
}

/* The leaf of the grow strategy's branch b (where its newest token is). */
static int32_t branch_leaf(const strategy *g, const forest *f, int32_t b) {
    strategy_result r;
    strategy_result_at(g, f, b, &r);
    return forest_index(r.leaf);
}

static void plan_print_text(const forest *f, const tok *tk, const step_plan *p, int32_t step,
                            const int32_t *cols, int32_t n_cols, int32_t max_cols,
                            const plan_sampled *smp, const strategy *g, int32_t k, const spec *sp) {
    char text[128], rb[32];
    printf("\nstep %d: %d rows, %d return logits%s\n", step, p->n_rows, p->n_out,
           step == 0 ? " (the prefill)" : "");
    printf("  row  node parent   pos  slot logits %s token\n", sp ? "role   " : "");
    for (int32_t r = 0; r < p->n_rows; r++) {
        const forest_node *nd = forest_node_at(f, p->node[r]);
        node_text(f, tk, p->node[r], text, sizeof text);
        printf("%5d %5d %6d %5d %5d %6s  ", r, p->node[r], nd->parent, p->pos[r], p->slot[r],
               p->want[r] ? "yes" : "-");
        if (sp) printf("%-7s ", plan_role(sp, f, p->node[r], rb, sizeof rb));
        prompt_show_str(stdout, text, 16);
        printf(" (%d)\n", p->tokens[r]);
    }
    int32_t first = n_cols > max_cols ? n_cols - max_cols : 0;
    if (p->n_swa > 0) {
        model_window_text(p->hp, text, sizeof text);
        printf("sliding %s: the grid is a windowed layer's mask\n", text);
    }
    if (p->hp && p->hp->full_attn_interval > 0)
        printf("recurrent: %d of every %d layers are Gated DeltaNet, outside the mask: a row "
               "goes on from its parent's state; %d states of %.1f KiB held after the step (a "
               "leaf, or a branch point still growing, holds one; a fork copies one)\n",
               p->hp->full_attn_interval - 1, p->hp->full_attn_interval, forest_rstate_used(f),
               (double)model_rstate_floats(p->hp) * 4.0 / 1024.0);
    printf("mask: %d rows x %d visible KV slots ('#' = the row may attend to that slot%s)", p->n_rows,
           n_cols, p->n_swa > 0 ? "; ':' = an ancestor outside the row's window: only global "
                                  "layers see it" : "");
    if (first) printf("; the first %d columns (slots %d..%d) are cut", first, cols[0], cols[first - 1]);
    printf("\n");
    /* slot numbers written vertically over their columns */
    int digits = 1;
    for (int32_t v = cols[n_cols - 1]; v >= 10; v /= 10) digits++;
    for (int d = digits - 1; d >= 0; d--) {
        printf(d == 0 ? "   slot  " : "         ");
        for (int32_t c = first; c < n_cols; c++) {
            int32_t v = cols[c];
            for (int i = 0; i < d; i++) v /= 10;
            putchar(d > 0 && v == 0 ? ' ' : '0' + v % 10);
        }
        putchar('\n');
    }
    if (p->attn_n > 0)
        printf("weights (--attn): a seen cell shows its attention weight in tenths, '#' from 0.95\n");
    for (int32_t r = 0; r < p->n_rows; r++) {
        printf("  row %-3d", r);
        for (int32_t c = first; c < n_cols; c++) {
            float w = step_plan_attn_of(p, r, cols[c]);
            putchar(!step_plan_sees(p, r, cols[c]) ? '.' : !isnan(w) ? mv_weight_digit(w)
                    : step_plan_sees_window(p, r, cols[c]) ? '#' : ':');
        }
        putchar('\n');
    }
    for (int32_t i = 0; i < smp->n; i++) {
        int32_t b = smp->branch[i];
        printf("%s prompt %d branch %d: ", i ? ";" : "sampled:", b / k, b % k);
        node_text(f, tk, branch_leaf(g, f, b), text, sizeof text);
        prompt_show_str(stdout, text, 16);
    }
    if (smp->n) putchar('\n');
}

/* The model's sliding window as JSON: {"n_swa", "layers"} (model_window_text), or null. */
static json_t *plan_window_json(const model_hparams *hp) {
    if (hp->n_swa <= 0) return json_null();
    char text[160];
    model_window_text(hp, text, sizeof text);
    json_t *w = json_object();
    jo_set(&w, "n_swa", json_integer(hp->n_swa));
    jo_set(&w, "layers", jo_str(text));
    return w;
}

/* The step's attention weights (--attn): {"layer", "head" (null: the mean), "weights":
 * per row, one per slot of its "mask" list, in that order}. */
static json_t *plan_attn_json(const step_plan *p, const int32_t *cols, int32_t n_cols) {
    json_t *a = json_object(), *rows = json_array();
    for (int32_t r = 0; r < p->n_rows; r++) {
        json_t *w = json_array();
        for (int32_t c = 0; c < n_cols; c++)
            if (step_plan_sees(p, r, cols[c])) jo_push(&w, json_real(step_plan_attn_of(p, r, cols[c])));
        jo_push(&rows, w);
    }
    jo_set(&a, "layer", json_integer(p->attn_w_layer));
    jo_set(&a, "head", p->attn_w_head < 0 ? json_null() : json_integer(p->attn_w_head));
    jo_set(&a, "weights", rows);
    return a;
}

/* One step as a JSON object: its rows, its mask (the slots each row sees) and the tokens
 * the branches sampled from it. */
static json_t *plan_step_json(const forest *f, const tok *tk, const step_plan *p, int32_t step,
                              const int32_t *cols, int32_t n_cols, const plan_sampled *smp,
                              const strategy *g, int32_t k, const spec *sp) {
    char text[256], rb[32];
    json_t *rows = json_array(), *mask = json_array(), *sampled = json_array(), *st = json_object();
    json_t *win = p->n_swa > 0 ? json_array() : NULL;
    for (int32_t r = 0; r < p->n_rows; r++) {
        json_t *row = json_object(), *sees = json_array();
        node_text(f, tk, p->node[r], text, sizeof text);
        jo_set(&row, "row", json_integer(r));
        jo_set(&row, "id", json_integer(p->node[r]));
        jo_set(&row, "parent", json_integer(forest_node_at(f, p->node[r])->parent));
        jo_set(&row, "token", json_integer(p->tokens[r]));
        jo_set(&row, "text", jo_str(text));
        jo_set(&row, "pos", json_integer(p->pos[r]));
        jo_set(&row, "slot", json_integer(p->slot[r]));
        jo_set(&row, "logits", json_boolean(p->want[r]));
        if (sp) jo_set(&row, "role", jo_str(plan_role(sp, f, p->node[r], rb, sizeof rb)));
        jo_push(&rows, row);
        json_t *in = win ? json_array() : NULL;
        for (int32_t c = 0; c < n_cols; c++) {
            if (step_plan_sees(p, r, cols[c])) jo_push(&sees, json_integer(cols[c]));
            if (in && step_plan_sees_window(p, r, cols[c])) jo_push(&in, json_integer(cols[c]));
        }
        jo_push(&mask, sees);
        if (win) jo_push(&win, in);
    }
    for (int32_t i = 0; i < smp->n; i++) {
        int32_t b = smp->branch[i];
        json_t *x = json_object();
        node_text(f, tk, branch_leaf(g, f, b), text, sizeof text);
        jo_set(&x, "prompt", json_integer(b / k));
        jo_set(&x, "branch", json_integer(b % k));
        jo_set(&x, "token", json_integer(smp->token[i]));
        jo_set(&x, "text", jo_str(text));
        jo_push(&sampled, x);
    }
    jo_set(&st, "step", json_integer(step));
    if (p->attn_n > 0) jo_set(&st, "attention", plan_attn_json(p, cols, n_cols));
    jo_set(&st, "rows", rows);
    jo_set(&st, "mask", mask);
    if (win) jo_set(&st, "mask_window", win); /* the windowed layers' mask */
    if (p->hp && p->hp->full_attn_interval > 0) { /* recurrent layers: states, not a mask */
        jo_set(&st, "rstate_cells", json_integer(forest_rstate_used(f)));
        jo_set(&st, "rstate_bytes_each", json_integer(model_rstate_floats(p->hp) * 4));
    }
    jo_set(&st, "sampled", sampled);
    return st;
}

/* The observer of a speculative step: shows its plan before acceptance prunes it (text
 * printed, or the step's JSON object kept in cur); the tick then shows what it emitted. */
typedef struct plan_spec_ud {
    const tok *tk;
    int32_t *cols;        /* (n_slots) */
    int32_t n_slots, step, max_cols, steps;
    bool json;
    json_t *cur;          /* the step's object (json) */
    json_t *list;         /* the steps' objects (json) */
    prompt_toks out;      /* the tokens the step emitted */
    int32_t prev;         /* the token before them */
} plan_spec_ud;

static void plan_spec_observe(void *ud, const spec *sp, const forest *f, const step_plan *p) {
    plan_spec_ud *u = ud;
    plan_sampled none = {0};
    int32_t n_cols = plan_columns(p, u->n_slots, u->cols);
    json_decref(u->cur);
    if (u->json) u->cur = plan_step_json(f, u->tk, p, u->step, u->cols, n_cols, &none, NULL, 1, sp);
    else plan_print_text(f, u->tk, p, u->step, u->cols, n_cols, u->max_cols, &none, NULL, 1, sp);
}

/* The k tokens a speculative step emitted after token prev: a JSON list (json), or
 * printed on the current line (then NULL). */
static json_t *plan_emitted(const tok *tk, int32_t prev, const int32_t *out, int32_t k, bool json) {
    char buf[128];
    json_t *list = json ? json_array() : NULL;
    if (!json) printf("emitted %d token%s (%d accepted from drafts):", k, k == 1 ? "" : "s", k - 1);
    for (int32_t i = 0; i < k; i++) {
        prompt_token_text(tk, prev, out[i], buf, sizeof buf);
        prev = out[i];
        if (json) {
            json_t *e = json_object();
            jo_set(&e, "token", json_integer(out[i]));
            jo_set(&e, "text", jo_str(buf));
            jo_push(&list, e);
        } else {
            putchar(' ');
            prompt_show_str(stdout, buf, 16);
        }
    }
    if (!json) putchar('\n');
    return list;
}

/* After each speculative step: what it emitted; the run ends after --steps steps or at an
 * end-of-generation token (the strategy runs without the tokenizer, so that it keeps and
 * emits every token the step accepted, the end token included, as the plan shows them). */
static bool plan_spec_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    (void)s, (void)env;
    plan_spec_ud *u = ud;
    const int32_t *out = u->out.t;
    int32_t k = u->out.n;
    json_t *emitted = plan_emitted(u->tk, u->prev, out, k, u->json);
    if (u->json) {
        jo_set(&u->cur, "emitted", emitted);
        jo_push(&u->list, u->cur);
        u->cur = NULL;
    }
    u->step = st->steps;
    u->prev = out[k - 1];
    u->out.n = 0;
    return st->steps < u->steps && !tok_is_eog(u->tk, out[k - 1]);
}

/* The speculative strategy from the prompt's last node, stepped by the plan: no budget
 * but the steps, no window adaptation (every step shows the window). */
static strategy *plan_spec_create(const spec_opts *so, strategy_env *env, forest_id tip, plan_spec_ud *u,
                                  st_err *err) {
    strategy_opts o = strategy_opts_for(strategy_find(so->sp.la.w > 0 ? "lookahead" : "draft"));
    o.from = tip;
    o.budget = INT32_MAX;
    o.u.spec.p = so->sp;
    o.u.spec.p.la_adaptive = false;
    o.u.spec.observe = plan_spec_observe;
    o.u.spec.observe_ud = u;
    env->emit = prompt_emit;
    env->emit_ud = &u->out;
    return strategy_create(&o, env, err);
}

/* The document (JSON) or the closing line of a speculative run. */
static st_code plan_spec_end(const prompt_model *pm, forest *f, plan_spec_ud *u, const char *what, int32_t n,
                             st_err *err) {
    if (!u->json) {
        printf("\n%d step%s run; KV slots in use: %d of %d\n", u->step, u->step == 1 ? "" : "s",
               kv_alloc_used(forest_kv(f)), pm->n_slots);
        return ST_OK;
    }
    json_t *doc = json_object();
    jo_set(&doc, "model_kv_slots", json_integer(pm->n_slots));
    jo_set(&doc, "window", plan_window_json(&pm->m->hp));
    jo_set(&doc, "drafts", jo_str(what));
    jo_set(&doc, "prompt_tokens", json_integer(n));
    jo_set(&doc, "steps", u->list);
    u->list = NULL;
    jo_set(&doc, "kv_slots_used", json_integer(kv_alloc_used(forest_kv(f))));
    return jo_print(doc, err);
}

/* --draft / --lookahead: the steps of speculative greedy decoding from one prompt, with
 * the weights of layer attn[0], head attn[1] when attn[0] >= 0 (--attn). */
static st_code plan_spec(prompt_model *pm, const char *text, const spec_opts *so, int32_t steps,
                         int32_t max_cols, bool json, const int32_t attn[2], st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    plan.attn_want = attn[0] >= 0, plan.attn_layer = attn[0], plan.attn_head = attn[1];
    strategy *s = NULL;
    strategy_env env = {.f = f, .plan = &plan, .ctx = pm->ctx};
    app_run_stats st;
    int32_t n = 0;
    plan_spec_ud u = {.tk = pm->tk, .n_slots = pm->n_slots, .max_cols = max_cols, .steps = steps,
                      .json = json, .list = json ? json_array() : NULL};
    int32_t *t = prompt_tokens(pm, NULL, text, &n, NULL, err);
    st_code rc = t ? ST_OK : err->code;
    forest_id tip;
    if (!rc && !f) rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = prompt_check_fits(n, pm->n_slots, "the prompt", err);
    if (!rc) rc = forest_add_root(f, t, NULL, n, 0, &tip, err);
    if (!rc && !(s = plan_spec_create(so, &env, tip, &u, err))) rc = err->code;
    if (!rc && !(u.cols = malloc(sizeof(int32_t) * (size_t)pm->n_slots)))
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    if (rc) goto out;
    char what[160];
    spec_opts_describe(so, what, sizeof what);
    if (!json)
        printf("speculative greedy decoding: %s; prompt of %d tokens; KV cache %d slots\n"
               "(la L,I = lookahead window level L, column I: position tip + I + L)\n", what, n,
               pm->n_slots);
    u.prev = t[n - 1];
    rc = app_strategy_run(s, &env, &st, plan_spec_tick, &u, err);
    if (!rc && st.full) rc = err->code; /* the step's own message */
    if (!rc) rc = plan_spec_end(pm, f, &u, what, n, err);
    fflush(stdout);
out:
    json_decref(u.cur);
    json_decref(u.list);
    free(t);
    prompt_toks_free(&u.out, 1);
    free(u.cols);
    strategy_free(s);
    step_plan_free(&plan);
    forest_free(f);
    return rc;
}

typedef struct plan_opts {
    prompt_model_opts mo;
    spec_opts so;
    sample_params sp;
    const char *prompts[PLAN_MAX_PROMPTS], *context;
    int32_t n_prompts;
    int64_t k, steps, max_cols;
    int64_t window, window_pattern; /* --window N[,P]: forced on (0: the model's own) */
    bool json;
    const char *svg, *svg_mask, *slide; /* pictures to write (ui/svg.h), or NULL */
    int64_t attn_layer, attn_head; /* --attn L[:H]: layer -1 none, head -1 the mean */
} plan_opts;

/* The grow-mode run: the forest, its branches, and what the steps report. */
typedef struct plan_job {
    forest *f;
    step_plan plan;
    strategy_env env;
    strategy *s;                            /* grow: k branches from every prompt */
    forest_id from[PLAN_MAX_PROMPTS];       /* the prompts' last nodes */
    plan_sampled smp;
    int32_t *cols;                          /* (n_slots) */
    int32_t n_trees, n_tokens, n_tok_prompt[PLAN_MAX_PROMPTS];
    mask_view *mv;                          /* the last step, for the pictures (or NULL) */
    const prompt_model *pm;                 /* for the tick */
    const plan_opts *o;
    json_t *list;                           /* the steps' objects (--json) */
} plan_job;

/* An option's value "A" or "A<sep>B": A into head (cap bytes); returns B, or NULL without
 * sep. *bad when A does not fit (after the usage error naming opt). */
static const char *opt_pair(const char *opt, const char *arg, char sep, char *head, size_t cap, bool *bad) {
    const char *at = strchr(arg, sep);
    size_t len = at ? (size_t)(at - arg) : strlen(arg);
    *bad = len >= cap && app_usage_error("%s: '%s' is too long", opt, arg);
    snprintf(head, cap, "%.*s", (int)len, arg);
    return at ? at + 1 : NULL;
}

/* --window N[,P]: 1 (after the usage error) when it does not parse. */
static int plan_window_opt(const char *arg, plan_opts *o) {
    char n[32];
    bool bad;
    const char *pattern = opt_pair("--window", arg, ',', n, sizeof n, &bad);
    o->window_pattern = 0;
    return bad || app_opt_int("--window", n, 1, 1 << 24, &o->window) ||
           (pattern && app_opt_int("--window's layer pattern", pattern, 2, 1 << 16, &o->window_pattern));
}

/* --attn L[:H]: 1 (after the usage error) when it does not parse. */
static int plan_attn_opt(const char *arg, plan_opts *o) {
    char n[32];
    bool bad;
    const char *head = opt_pair("--attn", arg, ':', n, sizeof n, &bad);
    o->attn_head = -1;
    return bad || app_opt_int("--attn's layer", n, 0, 1 << 16, &o->attn_layer) ||
           (head && app_opt_int("--attn's head", head, 0, 1 << 16, &o->attn_head));
}

/* The command line: -1 to go on, else the exit status (0 after --help, 2 for a bad
 * option). */
static int plan_parse(int argc, char **argv, plan_opts *o) {
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
        {"prompt", 1, 0, 'p'}, {"context", 1, 0, 'X'}, {"branches", 1, 0, 'k'},
        {"steps", 1, 0, 's'},  {"max-cols", 1, 0, 'W'}, {"json", 0, 0, 'J'},
        {"window", 1, 0, 'w'}, {"attn", 1, 0, 0x202},
        {"svg", 1, 0, 0x200},  {"svg-mask", 1, 0, 0x201}, {"slide", 1, 0, 0x203},
        SPEC_LONGOPTS,         {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    int ch, r;
    bool temp_given = false; /* --draft samples only when asked to (greedy by default) */
    while ((ch = getopt_long(argc, argv, "m:p:t:c:k:s:h", lo, NULL)) != -1) {
        temp_given |= ch == 'T';
        if ((r = prompt_model_opt(&o->mo, ch, optarg)) >= 0 ||
            (r = prompt_sample_opt(&o->sp, ch, optarg)) >= 0 || (r = spec_opt(&o->so, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        switch (ch) {
        case 'p':
            if (o->n_prompts == PLAN_MAX_PROMPTS)
                return app_usage_error("at most %d prompts", PLAN_MAX_PROMPTS);
            o->prompts[o->n_prompts++] = optarg;
            break;
        case 'X': o->context = optarg; break;
        case 'k':
            if (app_opt_int("--branches", optarg, 1, 256, &o->k)) return 2;
            break;
        case 's':
            if (app_opt_int("--steps", optarg, 1, 4096, &o->steps)) return 2;
            break;
        case 'W':
            if (app_opt_int("--max-cols", optarg, 1, 100000, &o->max_cols)) return 2;
            break;
        case 'J': o->json = true; break;
        case 'w':
            if (plan_window_opt(optarg, o)) return 2;
            break;
        case 0x200: o->svg = optarg; break;
        case 0x201: o->svg_mask = optarg; break;
        case 0x203: o->slide = optarg; break;
        case 0x202:
            if (plan_attn_opt(optarg, o)) return 2;
            break;
        case 'h': plan_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode plan --help", PLAN_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->mo.path) return app_usage_error("plan needs a model: -m MODEL");
    if (o->so.on && (o->n_prompts > 1 || o->context))
        return app_usage_error("--draft / --lookahead show one prompt's decoding: one -p, no --context");
    if (o->so.on && (o->svg || o->svg_mask || o->slide))
        return app_usage_error("--svg draws the grow mode's forest: not with --draft / --lookahead");
    if (o->so.on && temp_given) o->so.sp.samp = o->sp;
    return -1;
}

/* --context: the shared chain every prompt continues; *last gets its last node. */
static st_code plan_context(plan_job *j, prompt_model *pm, const char *context, forest_id *last,
                            st_err *err) {
    int32_t n = 0;
    int32_t *t = prompt_encode_raw(pm->tk, context, tok_add_bos(pm->tk), &n, err);
    if (!t) return err->code;
    st_code rc = ST_OK;
    if (n == 0) rc = st_set(err, ST_ERR_ARG, "the context is empty and the model has no BOS");
    if (!rc && !(rc = prompt_check_fits(n, pm->n_slots, "the context", err)))
        rc = forest_add_root(j->f, t, NULL, n, 0, last, err);
    free(t);
    j->n_tokens = n;
    return rc;
}

/* The forest: a shared context chain with the prompts under it, or one root each; then k
 * branches to grow from every prompt. */
static st_code plan_forest(plan_job *j, prompt_model *pm, const plan_opts *o, st_err *err) {
    forest_id *from = j->from, ctx_last = FOREST_NONE;
    st_code rc = o->context ? plan_context(j, pm, o->context, &ctx_last, err) : ST_OK;
    for (int32_t i = 0; i < j->n_trees && !rc; i++) {
        const char *text = o->n_prompts ? o->prompts[i] : "";
        int32_t n = 0;
        int32_t *t = o->context ? prompt_encode_raw(pm->tk, text, false, &n, err)
                                : prompt_tokens(pm, NULL, text, &n, NULL, err);
        if (!t) return err->code;
        j->n_tok_prompt[i] = n;
        j->n_tokens += n;
        if (!(rc = prompt_check_fits(j->n_tokens, pm->n_slots, "the forest's prompts", err))) {
            if (n == 0) from[i] = ctx_last; /* an empty prompt branches from the context */
            else if (o->context) rc = forest_append(j->f, ctx_last, t, NULL, n, &from[i], err);
            else rc = forest_add_root(j->f, t, NULL, n, 0, &from[i], err);
        }
        free(t);
    }
    if (rc) return rc;
    /* branch i * k + b grows from prompt i with seed + i * k + b; an empty prompt's
     * branches grow from the context's last node (grow returns its logits too) */
    /* one prompt: k chains with distinct first tokens (cot), so that the forks differ
       even greedily; several: k sampled branches from each */
    bool cot = j->n_trees == 1 && o->k > 1;
    strategy_opts so = strategy_opts_for(strategy_find(cot ? "cot" : "grow"));
    so.sample = o->sp, so.budget = (int32_t)o->steps, so.n_vocab = pm->m->hp.n_vocab;
    if (cot) so.from = from[0], so.u.cot.k = (int32_t)o->k;
    else so.u.grow.n = (int32_t)o->k, so.u.grow.starts = from, so.u.grow.n_starts = j->n_trees;
    j->env = (strategy_env){.f = j->f, .plan = &j->plan, .ctx = pm->ctx, .tk = pm->tk, .emit = plan_emit,
                            .emit_ud = &j->smp};
    return (j->s = strategy_create(&so, &j->env, err)) ? ST_OK : err->code;
}

/* The document's head (JSON): the model, the cache, the context and the prompts. */
static json_t *plan_head_json(const plan_job *j, const prompt_model *pm, const plan_opts *o) {
    json_t *doc = json_object(), *prompts = json_array();
    for (int32_t i = 0; i < j->n_trees; i++) {
        json_t *p = json_object();
        jo_set(&p, "text", jo_str(o->n_prompts ? o->prompts[i] : ""));
        jo_set(&p, "tokens", json_integer(j->n_tok_prompt[i]));
        jo_push(&prompts, p);
    }
    jo_set(&doc, "model", jo_str(o->mo.path));
    jo_set(&doc, "kv_slots", json_integer(pm->n_slots));
    jo_set(&doc, "window", plan_window_json(&pm->m->hp));
    jo_set(&doc, "branches", json_integer(o->k));
    jo_set(&doc, "context", o->context ? jo_str(o->context) : json_null());
    jo_set(&doc, "prompts", prompts);
    return doc;
}

/* After each step: its plan and what the branches sampled (text printed as it goes, JSON
 * appended to j->list). The budget is the steps, so grow ends the run. */
static bool plan_grow_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    plan_job *j = ud;
    const plan_opts *o = j->o;
    int32_t k = (int32_t)o->k, step = st->steps - 1;
    int32_t n_cols = plan_columns(env->plan, j->pm->n_slots, j->cols);
    if (j->mv) {
        mv_capture(j->mv, env->f, j->pm->tk, env->plan, step);
        j->mv->rope_base = j->pm->m->hp.rope_base, j->mv->rope_dim = j->pm->m->hp.rope_dim;
    }
    if (o->json)
        jo_push(&j->list, plan_step_json(env->f, j->pm->tk, env->plan, step, j->cols, n_cols, &j->smp, s, k, NULL));
    else
        plan_print_text(env->f, j->pm->tk, env->plan, step, j->cols, n_cols, (int32_t)o->max_cols, &j->smp, s, k,
                        NULL);
    j->smp.n = 0;
    return true;
}

/* The pictures --svg and --svg-mask ask for. */
static st_code plan_pictures(const plan_job *j, const prompt_model *pm, const plan_opts *o, st_err *err) {
    st_code rc = o->svg ? svg_save(o->svg, j->f, pm->tk, j->mv, SVG_TREE | SVG_MASK, err) : ST_OK;
    if (!rc && o->svg_mask) rc = svg_save(o->svg_mask, j->f, pm->tk, j->mv, SVG_MASK, err);
    if (!rc && o->slide) rc = svg_save(o->slide, j->f, pm->tk, j->mv, SVG_TREE | SVG_MASK | SVG_SLIDE, err);
    return rc;
}

/* Grow mode: the forest of the prompts, then every step shown. */
static st_code plan_grow(prompt_model *pm, const plan_opts *o, st_err *err) {
    plan_job j = {.f = forest_init(pm->n_slots, 0), .n_trees = o->n_prompts ? o->n_prompts : 1, .pm = pm,
                  .o = o, .list = o->json ? json_array() : NULL};
    step_plan_init(&j.plan);
    j.plan.attn_want = o->attn_layer >= 0;
    j.plan.attn_layer = (int32_t)o->attn_layer, j.plan.attn_head = (int32_t)o->attn_head;
    size_t n_br = (size_t)j.n_trees * (size_t)o->k;
    j.smp.branch = malloc(sizeof(int32_t) * n_br);
    j.smp.token = malloc(sizeof(int32_t) * n_br);
    j.cols = malloc(sizeof(int32_t) * (size_t)pm->n_slots);
    bool pictures = o->svg || o->svg_mask || o->slide;
    if (pictures && (j.mv = malloc(sizeof *j.mv))) mv_init(j.mv);
    app_run_stats st = {0};
    st_code rc = ST_OK;
    if (!j.f || !j.smp.branch || !j.smp.token || !j.cols || (pictures && !j.mv))
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = plan_forest(&j, pm, o, err);
    if (!rc && !o->json)
        printf("forest: %s%d prompt%s (%d tokens in all), %lld branch%s per prompt; KV cache %d "
               "slots\n", o->context ? "a shared context with " : "", j.n_trees,
               j.n_trees > 1 ? "s" : "", j.n_tokens, (long long)o->k, o->k > 1 ? "es" : "",
               pm->n_slots);
    if (!rc && !o->json)
        printf("pos = RoPE position = depth in the tree: siblings share one, a child is one further\n");
    if (!rc) rc = app_strategy_run(j.s, &j.env, &st, plan_grow_tick, &j, err);
    if (!rc && st.full) rc = err->code; /* the step's own message */
    int32_t done = st.steps;
    if (!rc && pictures) rc = plan_pictures(&j, pm, o, err);
    if (!rc && o->json) {
        json_t *doc = plan_head_json(&j, pm, o);
        jo_set(&doc, "steps", j.list);
        j.list = NULL;
        jo_set(&doc, "kv_slots_used", json_integer(kv_alloc_used(forest_kv(j.f))));
        rc = jo_print(doc, err);
    } else if (!rc) {
        printf("\n%d step%s run; KV slots in use: %d of %d\n", done, done == 1 ? "" : "s",
               kv_alloc_used(forest_kv(j.f)), pm->n_slots);
    }
    fflush(stdout);
    json_decref(j.list);
    free(j.cols);
    free(j.mv);
    free(j.smp.branch);
    free(j.smp.token);
    strategy_free(j.s);
    step_plan_free(&j.plan);
    forest_free(j.f);
    return rc;
}

int cmd_plan(int argc, char **argv) {
    plan_opts o = {.mo = prompt_model_default_opts(), .so = spec_default_opts(),
                   .sp = sample_default_params(), .k = 2, .steps = 3, .max_cols = 120,
                   .attn_layer = -1, .attn_head = -1};
    int r = plan_parse(argc, argv, &o);
    if (r >= 0) return r;
    st_err err = {0};
    prompt_model pm;
    if (prompt_model_open(&pm, &o.mo, &err)) return app_fail(&err);
    if (o.window > 0) model_hparams_set_window(&pm.m->hp, (int32_t)o.window, (int32_t)o.window_pattern);
    const int32_t attn[2] = {(int32_t)o.attn_layer, (int32_t)o.attn_head};
    st_code rc = o.so.on ? plan_spec(&pm, o.n_prompts ? o.prompts[0] : "", &o.so, (int32_t)o.steps,
                                     (int32_t)o.max_cols, o.json, attn, &err)
                         : plan_grow(&pm, &o, &err);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
