/* cmd_plan.c - `multidecode plan`: shows, step by step, how the engine packs a forest into
 * one batch (teaching).
 *
 * The forest: one root chain per -p prompt (sharing nothing), or with --context a shared
 * context chain with every -p continuing under it. Each step is run by the grow policy
 * (engine/strategy/grow.h) with --branches k sampled branches per prompt; the first step computes
 * the prompts (prefill), each later one the branches' newest tokens. For every step this
 * prints the plan the step ran: the packed order (row, node id, parent id, token text,
 * RoPE position, KV slot, whether the row returns logits) and the attention mask as a grid
 * (rows = the step's queries, columns = every KV slot some row may see, '#' where the row
 * may attend), then the tokens the branches sampled from it. --json gives the same as one
 * JSON object. Node ids are the forest's array indices (stable for the whole run).
 *
 * With --lookahead W,N,G (or --draft) the steps are those of exact speculative greedy
 * decoding (sampling with --temp; engine/spec/spec.h) from the prompt instead: each plan
 * shows the tip, the draft tree and lookahead decoding's window (level l, column i at
 * position tip + i + l) with their roles, then the tokens the step accepted. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forest/forest.h"
#include "strategy/grow.h"
#include "spec/spec.h"
#include "forest/step.h"
#include "app.h"
#include "prompt.h"
#include "spec_opts.h"

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
            "  -k, --branches K     sampled branches grown from each prompt (default 2)\n"
            "  -s, --steps N        forest steps to run and show, the prefill included\n"
            "                       (default 3)\n"
            "      --max-cols N     widest mask grid drawn; wider ones show their last N\n"
            "                       columns (default 120)\n"
            "      --json           one JSON object instead of tables\n"
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

static void plan_print_text(const forest *f, const tok *tk, const step_plan *p, int32_t step,
                            const int32_t *cols, int32_t n_cols, int32_t max_cols,
                            const plan_sampled *smp, const grow *g, int32_t k, const spec *sp) {
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
    printf("mask: %d rows x %d visible KV slots ('#' = the row may attend to that slot)", p->n_rows,
           n_cols);
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
    for (int32_t r = 0; r < p->n_rows; r++) {
        printf("  row %-3d", r);
        for (int32_t c = first; c < n_cols; c++) putchar(step_plan_sees(p, r, cols[c]) ? '#' : '.');
        putchar('\n');
    }
    for (int32_t i = 0; i < smp->n; i++) {
        int32_t b = smp->branch[i];
        printf("%s prompt %d branch %d: ", i ? ";" : "sampled:", b / k, b % k);
        node_text(f, tk, forest_index(g->br[b].leaf), text, sizeof text);
        prompt_show_str(stdout, text, 16);
    }
    if (smp->n) putchar('\n');
}

static void plan_print_json(const forest *f, const tok *tk, const step_plan *p, int32_t step,
                            const int32_t *cols, int32_t n_cols, const plan_sampled *smp,
                            const grow *g, int32_t k, const spec *sp) {
    char text[256], rb[32];
    printf("%s\n  {\"step\": %d, \"rows\": [", step ? "," : "", step);
    for (int32_t r = 0; r < p->n_rows; r++) {
        const forest_node *nd = forest_node_at(f, p->node[r]);
        node_text(f, tk, p->node[r], text, sizeof text);
        printf("%s\n    {\"row\": %d, \"id\": %d, \"parent\": %d, \"token\": %d, \"text\": ",
               r ? "," : "", r, p->node[r], nd->parent, p->tokens[r]);
        prompt_json_str(stdout, text);
        printf(", \"pos\": %d, \"slot\": %d, \"logits\": %s", p->pos[r], p->slot[r],
               p->want[r] ? "true" : "false");
        if (sp) printf(", \"role\": \"%s\"", plan_role(sp, f, p->node[r], rb, sizeof rb));
        printf("}");
    }
    printf("],\n   \"mask\": [");
    for (int32_t r = 0; r < p->n_rows; r++) {
        printf("%s[", r ? ", " : "");
        int32_t n = 0;
        for (int32_t c = 0; c < n_cols; c++)
            if (step_plan_sees(p, r, cols[c])) printf("%s%d", n++ ? ", " : "", cols[c]);
        printf("]");
    }
    printf("],\n   \"sampled\": [");
    for (int32_t i = 0; i < smp->n; i++) {
        int32_t b = smp->branch[i];
        node_text(f, tk, forest_index(g->br[b].leaf), text, sizeof text);
        printf("%s{\"prompt\": %d, \"branch\": %d, \"token\": %d, \"text\": ", i ? ", " : "",
               b / k, b % k, smp->token[i]);
        prompt_json_str(stdout, text);
        printf("}");
    }
    printf("]"); /* the caller closes the object */
}

/* The observer of a speculative step: prints its plan before acceptance prunes it. */
typedef struct plan_spec_ud {
    const tok *tk;
    int32_t *cols;        /* (n_slots) */
    int32_t n_slots, step, max_cols;
    bool json;
} plan_spec_ud;

static void plan_spec_observe(void *ud, const spec *sp, const forest *f, const step_plan *p) {
    plan_spec_ud *u = ud;
    plan_sampled none = {0};
    int32_t n_cols = plan_columns(p, u->n_slots, u->cols);
    if (u->json) plan_print_json(f, u->tk, p, u->step, u->cols, n_cols, &none, NULL, 1, sp);
    else plan_print_text(f, u->tk, p, u->step, u->cols, n_cols, u->max_cols, &none, NULL, 1, sp);
}

/* --draft / --lookahead: the steps of speculative greedy decoding from one prompt. */
static st_code plan_spec(prompt_model *pm, const char *text, const spec_opts *so, int32_t steps,
                         int32_t max_cols, bool json, st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    spec *sp = NULL;
    int32_t n = 0, *out = NULL;
    plan_spec_ud u = {.tk = pm->tk, .n_slots = pm->n_slots, .max_cols = max_cols, .json = json};
    int32_t *t = prompt_tokens(pm, NULL, text, &n, NULL, err);
    st_code rc = t ? ST_OK : err->code;
    forest_id tip;
    if (!rc && !f) rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = prompt_check_fits(n, pm->n_slots, "the prompt", err);
    if (!rc) rc = forest_add_root(f, t, NULL, n, 0, &tip, err);
    spec_params spp = so->sp;
    spp.la_adaptive = false; /* every step shows the window */
    if (!rc && !(sp = spec_init(&spp, f, tip, err))) rc = err->code;
    if (!rc && (!(u.cols = malloc(sizeof(int32_t) * (size_t)pm->n_slots)) ||
                !(out = malloc(sizeof(int32_t) * (size_t)spec_max_emit(sp)))))
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    if (rc) goto out;
    spec_set_observer(sp, plan_spec_observe, &u);
    char what[160], buf[128];
    spec_opts_describe(so, what, sizeof what);
    if (json) {
        printf("{\"model_kv_slots\": %d, \"drafts\": ", pm->n_slots);
        prompt_json_str(stdout, what);
        printf(", \"prompt_tokens\": %d,\n \"steps\": [", n);
    } else {
        printf("speculative greedy decoding: %s; prompt of %d tokens; KV cache %d slots\n"
               "(la L,I = lookahead window level L, column I: position tip + I + L)\n", what, n,
               pm->n_slots);
    }
    for (u.step = 0; u.step < steps; u.step++) {
        int32_t k = 0;
        int32_t prev = forest_get(f, spec_tip(sp))->token;
        if ((rc = spec_step(sp, f, &plan, pm->ctx, out, &k, err))) break;
        if (json) printf(", \"emitted\": [");
        else printf("emitted %d token%s (%d accepted from drafts):", k, k == 1 ? "" : "s", k - 1);
        for (int32_t i = 0; i < k; i++) {
            prompt_token_text(pm->tk, prev, out[i], buf, sizeof buf);
            prev = out[i];
            if (json) {
                printf("%s{\"token\": %d, \"text\": ", i ? ", " : "", out[i]);
                prompt_json_str(stdout, buf);
                printf("}");
            } else {
                putchar(' ');
                prompt_show_str(stdout, buf, 16);
            }
        }
        printf(json ? "]}" : "\n");
        if (tok_is_eog(pm->tk, out[k - 1])) {
            u.step++;
            break;
        }
    }
    if (!rc) {
        if (json) printf("],\n \"kv_slots_used\": %d}\n", kv_alloc_used(forest_kv(f)));
        else printf("\n%d step%s run; KV slots in use: %d of %d\n", u.step, u.step == 1 ? "" : "s",
                    kv_alloc_used(forest_kv(f)), pm->n_slots);
    }
    fflush(stdout);
out:
    free(t);
    free(out);
    free(u.cols);
    spec_free(sp);
    step_plan_free(&plan);
    forest_free(f);
    return rc;
}

int cmd_plan(int argc, char **argv) {
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
        {"prompt", 1, 0, 'p'}, {"context", 1, 0, 'X'}, {"branches", 1, 0, 'k'},
        {"steps", 1, 0, 's'},  {"max-cols", 1, 0, 'W'}, {"json", 0, 0, 'J'},
        SPEC_LONGOPTS,         {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    prompt_model_opts mo = prompt_model_default_opts();
    spec_opts so = spec_default_opts();
    sample_params sp = sample_default_params();
    const char *prompts[PLAN_MAX_PROMPTS], *context = NULL;
    int32_t n_prompts = 0;
    int64_t k = 2, steps = 3, max_cols = 120;
    bool json = false;
    int ch, r;
    bool temp_given = false; /* --draft samples only when asked to (greedy by default) */
    while ((ch = getopt_long(argc, argv, "m:p:t:c:k:s:h", lo, NULL)) != -1) {
        temp_given |= ch == 'T';
        if ((r = prompt_model_opt(&mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&sp, ch, optarg)) >= 0 ||
            (r = spec_opt(&so, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        switch (ch) {
        case 'p':
            if (n_prompts == PLAN_MAX_PROMPTS)
                return app_usage_error("at most %d prompts", PLAN_MAX_PROMPTS);
            prompts[n_prompts++] = optarg;
            break;
        case 'X': context = optarg; break;
        case 'k':
            if (app_opt_int("--branches", optarg, 1, 256, &k)) return 2;
            break;
        case 's':
            if (app_opt_int("--steps", optarg, 1, 4096, &steps)) return 2;
            break;
        case 'W':
            if (app_opt_int("--max-cols", optarg, 1, 100000, &max_cols)) return 2;
            break;
        case 'J': json = true; break;
        case 'h': plan_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode plan --help", PLAN_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!mo.path) return app_usage_error("plan needs a model: -m MODEL");
    if (so.on && (n_prompts > 1 || context))
        return app_usage_error("--draft / --lookahead show one prompt's decoding: one -p, no --context");
    if (so.on && temp_given) so.sp.samp = sp;

    st_err err = {0};
    prompt_model pm;
    if (prompt_model_open(&pm, &mo, &err)) return app_fail(&err);
    if (so.on) {
        st_code src = plan_spec(&pm, n_prompts ? prompts[0] : "", &so, (int32_t)steps,
                                (int32_t)max_cols, json, &err);
        prompt_model_close(&pm);
        return src ? app_fail(&err) : 0;
    }
    forest *f = forest_init(pm.n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    grow g = {0};
    int32_t n_trees = n_prompts ? n_prompts : 1, n_br = n_trees * (int32_t)k;
    plan_sampled smp = {malloc(sizeof(int32_t) * (size_t)n_br), malloc(sizeof(int32_t) * (size_t)n_br), 0};
    int32_t *cols = NULL;
    forest_id from[PLAN_MAX_PROMPTS], ctx_last = FOREST_NONE;
    int32_t n_tokens = 0, n_tok_prompt[PLAN_MAX_PROMPTS] = {0};
    st_code rc = ST_OK;
    if (!f || !smp.branch || !smp.token) {
        rc = st_set(&err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the forest: a shared context chain with the prompts under it, or one root each */
    if (context) {
        int32_t n = 0;
        int32_t *t = prompt_encode_raw(pm.tk, context, tok_add_bos(pm.tk), &n, &err);
        if (!t) goto fail;
        if (n == 0) rc = st_set(&err, ST_ERR_ARG, "the context is empty and the model has no BOS");
        if (!rc && !(rc = prompt_check_fits(n, pm.n_slots, "the context", &err)))
            rc = forest_add_root(f, t, NULL, n, 0, &ctx_last, &err);
        free(t);
        if (rc) goto out;
        n_tokens = n;
    }
    for (int32_t i = 0; i < n_trees; i++) {
        const char *text = n_prompts ? prompts[i] : "";
        int32_t n = 0;
        int32_t *t = context ? prompt_encode_raw(pm.tk, text, false, &n, &err)
                             : prompt_tokens(&pm, NULL, text, &n, NULL, &err);
        if (!t) goto fail;
        n_tok_prompt[i] = n;
        n_tokens += n;
        if (!(rc = prompt_check_fits(n_tokens, pm.n_slots, "the forest's prompts", &err))) {
            if (n == 0) from[i] = ctx_last; /* an empty prompt branches from the context */
            else if (context) rc = forest_append(f, ctx_last, t, NULL, n, &from[i], &err);
            else rc = forest_add_root(f, t, NULL, n, 0, &from[i], &err);
        }
        free(t);
        if (rc) goto out;
    }
    for (int32_t i = 0; i < n_trees; i++)
        for (int32_t j = 0; j < k; j++) {
            sample_params bp = sp;
            bp.seed = sp.seed + (uint64_t)(i * k + j);
            if ((rc = grow_add(&g, f, from[i], &bp, (int32_t)steps, pm.m->hp.n_vocab, &err))) goto out;
        }
    /* an empty prompt grows from the context's last node, which has the other prompts as
     * children: the step must still return its logits */
    for (int32_t i = 0; i < g.n; i++)
        if (forest_n_children(f, g.br[i].start) > 0) forest_set_flags(f, g.br[i].start, FOREST_WANT_LOGITS, 0);
    if (!(cols = malloc(sizeof(int32_t) * (size_t)pm.n_slots))) {
        rc = st_set(&err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }

    if (json) {
        printf("{\"model\": ");
        prompt_json_str(stdout, mo.path);
        printf(", \"kv_slots\": %d, \"branches\": %lld, \"context\": ", pm.n_slots, (long long)k);
        if (context) prompt_json_str(stdout, context);
        else printf("null");
        printf(", \"prompts\": [");
        for (int32_t i = 0; i < n_trees; i++) {
            printf("%s{\"text\": ", i ? ", " : "");
            prompt_json_str(stdout, n_prompts ? prompts[i] : "");
            printf(", \"tokens\": %d}", n_tok_prompt[i]);
        }
        printf("],\n \"steps\": [");
    } else {
        printf("forest: %s%d prompt%s (%d tokens in all), %lld branch%s per prompt; KV cache %d "
               "slots\n", context ? "a shared context with " : "", n_trees, n_trees > 1 ? "s" : "",
               n_tokens, (long long)k, k > 1 ? "es" : "", pm.n_slots);
    }
    int32_t done_steps = 0;
    for (int32_t s = 0; s < steps && g.n_active > 0; s++) {
        smp.n = 0;
        if ((rc = grow_step(&g, f, &plan, pm.ctx, pm.tk, plan_emit, &smp, NULL, &err))) break;
        int32_t n_cols = plan_columns(&plan, pm.n_slots, cols);
        if (json) {
            plan_print_json(f, pm.tk, &plan, s, cols, n_cols, &smp, &g, (int32_t)k, NULL);
            printf("}");
        } else {
            plan_print_text(f, pm.tk, &plan, s, cols, n_cols, (int32_t)max_cols, &smp, &g,
                            (int32_t)k, NULL);
        }
        done_steps++;
    }
    if (json) printf("],\n \"kv_slots_used\": %d}\n", kv_alloc_used(forest_kv(f)));
    else printf("\n%d step%s run; KV slots in use: %d of %d\n", done_steps, done_steps == 1 ? "" : "s",
                kv_alloc_used(forest_kv(f)), pm.n_slots);
    fflush(stdout);
    goto out;
fail:
    rc = err.code;
out:
    free(cols);
    free(smp.branch);
    free(smp.token);
    grow_free(&g);
    step_plan_free(&plan);
    forest_free(f);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
