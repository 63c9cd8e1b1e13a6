/* test_cot.c - chains of thought over the forest against linear decoding, stop strings,
 * the repetition penalty and the self-consistency vote.
 *
 * The reference decodes each chain alone: the prompt linearly, chain i's first token
 * drawn by a sampler seeded seed + i from the prompt's logits with chains 0..i-1's first
 * tokens removed, then every next token from linear logits of the whole path with that
 * same sampler. Since forest leaves get exactly linear decoding's logits, every chain
 * must be token-for-token identical. Also: the first tokens are distinct; greedy chains
 * start with the k best tokens in order; cot k=1 greedy (and sampled) equals plain
 * linear decoding; forest invariants and rows per step after every step; a stop string
 * cuts a chain exactly where its text first ends with it; answers are extracted and
 * voted as documented. */
#include "strategy/cot.h"
#include "convert/mkmodel.h"
#include "t.h"
#include "t_model.h"

#define MAXLEN 512


/* Chain i alone, decoded linearly (see the file comment); returns its length. */
static int32_t reference_chain(model_ctx *lc, const int32_t *prompt, int32_t P,
                               const sample_params *sp, int32_t i, const int32_t *firsts,
                               int32_t budget, const tok *tk, int32_t V, int32_t *out) {
    int32_t seq[MAXLEN];
    float *lg = malloc(sizeof(float) * (size_t)V);
    sample_params p = *sp;
    p.seed = sp->seed + (uint64_t)i;
    sampler s;
    sampler_init(&s, &p, V);
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)P);
    st_err err = {0};
    int32_t n = 0;
    model_forward_linear(lc, seq, P, 0, lg, &err);
    for (int32_t j = 0; j < i; j++) lg[firsts[j]] = -INFINITY;
    while (n < budget) {
        int32_t t = sampler_sample_hist(&s, lg, V, seq, P + n);
        if (tk && tok_is_eog(tk, t)) break;
        seq[P + n] = out[n] = t;
        n++;
        if (n == budget) break;
        /* incremental linear decoding: slots 0..P+n-2 hold this chain's own prefix */
        model_forward_linear(lc, &seq[P + n - 1], 1, P + n - 1, lg, &err);
    }
    sampler_free(&s);
    free(lg);
    return n;
}

typedef struct run_res {
    int32_t k;
    int32_t toks[64][MAXLEN];
    int32_t n[64];
    int32_t first[64];
    int32_t stop[64];
} run_res;

/* Runs cot and checks invariants and rows after every step. */
static void run_cot(const model *m, const tok *tk, const int32_t *prompt, int32_t P,
                    const sample_params *sp, int32_t k, int32_t budget, const char *stop,
                    const char *what, run_res *r) {
    int32_t V = m->hp.n_vocab, n_slots = 4096;
    model_ctx *c = t_new_ctx(m, n_slots);
    forest *f = forest_init(n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    st_err err = {0};
    forest_id last;
    forest_add_root(f, prompt, NULL, P, 0, &last, &err);
    cot ct;
    st_code rc = cot_init(&ct, f, last, k, sp, budget, V, &err);
    T_CHECK(rc == ST_OK, "%s: init: %s", what, err.msg);
    if (stop) cot_set_stop(&ct, &stop, 1, &err);
    bool inv = true, rows = true;
    int32_t steps = 0, active = k;
    while (!rc && !cot_done(&ct)) {
        int32_t before = active;
        rc = cot_step(&ct, f, &plan, c, tk, NULL, NULL, &active, &err);
        T_CHECK(rc == ST_OK, "%s: step: %s", what, err.msg);
        inv = inv && forest_check(f, &err) == ST_OK;
        /* rows with logits: the live chains; other rows: last tokens of chains that just
         * ended by a stop string or the budget (computed, not extended) */
        if (steps == 0) rows = rows && plan.n_rows == P && plan.n_out == 1;
        else rows = rows && plan.n_out == before && plan.n_rows <= k;
        steps++;
    }
    T_CHECK(inv, "%s: forest invariants after every step: %s", what, err.msg);
    T_CHECK(rows, "%s: the first step computes the prompt, later ones score one row per live "
            "chain", what);
    r->k = k;
    for (int32_t i = 0; i < k; i++) {
        r->n[i] = cot_chain_tokens(&ct, f, i, r->toks[i], MAXLEN);
        r->first[i] = ct.first[i];
        r->stop[i] = ct.g.br[i].stop;
    }
    cot_free(&ct);
    step_plan_free(&plan);
    forest_free(f);
    model_ctx_free(c);
}

static void check_against_linear(const model *m, const tok *tk, const int32_t *prompt, int32_t P,
                                 const sample_params *sp, int32_t k, int32_t budget,
                                 const char *what) {
    int32_t V = m->hp.n_vocab;
    run_res *r = malloc(sizeof *r);
    run_cot(m, tk, prompt, P, sp, k, budget, NULL, what, r);
    bool distinct = true;
    for (int32_t i = 0; i < k; i++)
        for (int32_t j = 0; j < i; j++) distinct = distinct && r->first[i] != r->first[j];
    T_CHECK(distinct, "%s: the %d first tokens are distinct", what, k);
    model_ctx *lc = t_new_ctx(m, P + budget + 1);
    int32_t *ref = malloc(sizeof(int32_t) * MAXLEN), same = 0;
    for (int32_t i = 0; i < k; i++) {
        int32_t n = reference_chain(lc, prompt, P, sp, i, r->first, budget, tk, V, ref);
        bool eq = n == r->n[i] && !memcmp(ref, r->toks[i], sizeof(int32_t) * (size_t)n);
        if (!eq) fprintf(stderr, "%s: chain %d: %d tokens, reference %d\n", what, i, r->n[i], n);
        same += eq;
    }
    T_CHECK(same == k, "%s: %d of %d chains equal linear decoding with their seed", what, same, k);
    if (sp->temp <= 0) { /* greedy: the first tokens are the k best, in order */
        float *lg = malloc(sizeof(float) * (size_t)V);
        st_err err = {0};
        model_forward_linear(lc, prompt, P, 0, lg, &err);
        bool order = true;
        for (int32_t i = 0; i < k; i++) {
            int32_t best = sample_argmax(lg, V);
            order = order && r->first[i] == best;
            lg[best] = -INFINITY;
        }
        T_CHECK(order, "%s: greedy first tokens are the %d best in order", what, k);
        free(lg);
    }
    if (getenv("MD_VERBOSE"))
        fprintf(stderr, "%s: chain lengths %d %d ...\n", what, r->n[0], k > 1 ? r->n[1] : -1);
    free(ref);
    free(r);
    model_ctx_free(lc);
}

/* k = 1 equals plain linear decoding (generate) with the same seed, greedy or sampled. */
static void check_k1(const model *m, const tok *tk, const int32_t *prompt, int32_t P,
                     const sample_params *sp, const char *what) {
    int32_t V = m->hp.n_vocab, budget = 40;
    run_res *r = malloc(sizeof *r);
    run_cot(m, tk, prompt, P, sp, 1, budget, NULL, what, r);
    model_ctx *lc = t_new_ctx(m, P + budget + 1);
    int32_t seq[MAXLEN], n = 0;
    float *lg = malloc(sizeof(float) * (size_t)V);
    sampler s;
    sampler_init(&s, sp, V);
    st_err err = {0};
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)P);
    model_forward_linear(lc, seq, P, 0, lg, &err);
    while (n < budget) { /* generate's loop, incrementally */
        int32_t t = sampler_sample(&s, lg, V);
        if (tk && tok_is_eog(tk, t)) break;
        seq[P + n++] = t;
        if (n == budget) break;
        model_forward_linear(lc, &seq[P + n - 1], 1, P + n - 1, lg, &err);
    }
    T_CHECK(n == r->n[0] && !memcmp(seq + P, r->toks[0], sizeof(int32_t) * (size_t)n),
            "%s: cot k=1 equals linear decoding (%d vs %d tokens)", what, r->n[0], n);
    sampler_free(&s);
    free(lg);
    free(r);
    model_ctx_free(lc);
}

/* The text of chain tokens as it reads after the fork token. */
static void chain_text(const tok *tk, int32_t from_tok, const int32_t *t, int32_t n, char *out,
                       size_t cap) {
    int32_t buf[MAXLEN + 1];
    buf[0] = from_tok;
    memcpy(buf + 1, t, sizeof(int32_t) * (size_t)n);
    char head[256];
    size_t hl = tok_decode(tk, buf, 1, head, sizeof head);
    tok_decode(tk, buf, n + 1, out, cap);
    memmove(out, out + hl, strlen(out + hl) + 1);
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

static void check_stop(const model *m, const tok *tk, const int32_t *prompt, int32_t P) {
    sample_params sp = sample_default_params();
    sp.seed = 7;
    int32_t budget = 60, k = 6;
    run_res *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    run_cot(m, tk, prompt, P, &sp, k, budget, NULL, "stop: without", a);
    run_cot(m, tk, prompt, P, &sp, k, budget, ".", "stop: with '.'", b);
    bool prefix = true, cut = true;
    int32_t stopped = 0;
    char text[8192];
    for (int32_t i = 0; i < k; i++) {
        prefix = prefix && b->n[i] <= a->n[i] &&
                 !memcmp(a->toks[i], b->toks[i], sizeof(int32_t) * (size_t)b->n[i]);
        /* it stops at the first prefix whose text ends with "." */
        for (int32_t j = 1; j <= a->n[i]; j++) {
            chain_text(tk, prompt[P - 1], a->toks[i], j, text, sizeof text);
            if (ends_with(text, ".")) {
                cut = cut && b->n[i] == j && b->stop[i] == 0;
                break;
            }
            if (j == a->n[i]) cut = cut && b->n[i] == a->n[i] && b->stop[i] == -1;
        }
        stopped += b->stop[i] == 0;
    }
    T_CHECK(prefix, "stop string: each chain is a prefix of the unstopped chain");
    T_CHECK(cut && stopped > 0, "stop string: chains end exactly where their text first ends "
            "with '.' (%d of %d did)", stopped, k);
    free(a);
    free(b);
}

static void test_vote(void) {
    cot_vote_spec v = {0};
    st_err err = {0};
    char out[64];
    T_CHECK(cot_vote_parse("last-number", &v, &err) == ST_OK && v.kind == COT_VOTE_LAST_NUMBER,
            "parse last-number");
    T_CHECK(cot_vote_parse("marker:", &v, &err) == ST_ERR_ARG, "an empty marker is refused");
    T_CHECK(cot_vote_parse("first-word", &v, &err) == ST_ERR_ARG, "an unknown pattern is refused");
    cot_vote_parse("last-number", &v, &err);
    struct { const char *in, *want; } nums[] = {
        {"3 apples and 4 pears, so 7.", "7"}, {"total 1,200.50 dollars", "1200.5"},
        {"x = -12 then 3.0", "3"}, {"no digits here", NULL}, {"abc-5", "5"},
        {"the answer is -5", "-5"}, {"2.500", "2.5"}, {"in 2024, 17 cats", "17"},
        /* a reasoning model's answer is what follows its last </think> (Qwen3) */
        {"<think>try 41, no: 40</think>\n\n42", "42"}, {"<think>maybe 41</think>forty-two", NULL},
    };
    bool ok = true;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        int32_t n = cot_extract(&v, nums[i].in, out, sizeof out);
        bool good = nums[i].want ? n >= 0 && !strcmp(out, nums[i].want) : n < 0;
        if (!good) fprintf(stderr, "last-number of '%s': '%s'\n", nums[i].in, out);
        ok = ok && good;
    }
    T_CHECK(ok, "last-number extraction");
    cot_vote_parse("marker:Answer:", &v, &err);
    T_CHECK(cot_extract(&v, "Answer: 3\nthinking\nAnswer:  blue whale. \nmore", out, sizeof out) > 0 &&
                !strcmp(out, "blue whale"), "marker: the last occurrence, to the end of its line");
    T_CHECK(cot_extract(&v, "no marker", out, sizeof out) < 0, "marker absent: no answer");
    T_CHECK(cot_extract(&v, "<think>Answer: 3</think>I cannot tell", out, sizeof out) < 0,
            "marker: a marker inside <think> .. </think> is not the answer");
    const char *ans[] = {"4", NULL, "5", "5", "4", "6"};
    int32_t votes;
    int32_t w = cot_majority(ans, NULL, 6, &votes);
    T_CHECK(w == 0 && votes == 2, "majority tie: the answer seen first wins (%d, %d votes)", w, votes);
    const char *ans2[] = {"4", "5", "5"};
    w = cot_majority(ans2, NULL, 3, &votes);
    T_CHECK(w == 1 && votes == 2, "majority: 5 wins with 2 votes");
    const char *none[] = {NULL, NULL};
    T_CHECK(cot_majority(none, NULL, 2, &votes) == -1 && votes == 0, "no answers: no winner");
    /* only the chains that count vote: two budget-cut "7"s lose to one ended "5" */
    const char *cut[] = {"7", "5", "7"};
    strategy_end ends[] = {STRAT_END_BUDGET, STRAT_END_EOG, STRAT_RUNNING};
    bool counts[3];
    for (int i = 0; i < 3; i++) counts[i] = cot_vote_counts(&v, ends[i]);
    w = cot_majority(cut, counts, 3, &votes);
    T_CHECK(w == 1 && votes == 1, "ended chains only: 5 wins with 1 vote (%d, %d votes)", w, votes);
    v.all = true;
    for (int i = 0; i < 3; i++) counts[i] = cot_vote_counts(&v, ends[i]);
    w = cot_majority(cut, counts, 3, &votes);
    T_CHECK(w == 0 && votes == 2, "--vote-all: 7 wins with 2 votes (%d, %d votes)", w, votes);
    T_CHECK(cot_vote_counts(&(cot_vote_spec){COT_VOTE_LAST_NUMBER, NULL, false}, STRAT_END_STOP),
            "a chain a stop string ended votes");
}

/* The repetition penalty (sample.h), as llama.cpp applies it. */
static void test_penalty(void) {
    sample_params sp = sample_default_params();
    sp.temp = 0;
    sp.repeat_penalty = 1.5f;
    sampler s;
    sampler_init(&s, &sp, 3);
    float pos[3] = {2.0f, 1.9f, -1.0f}, neg[3] = {-1.0f, -1.2f, -3.0f};
    int32_t hist[3] = {0, 0, 2};
    T_CHECK(sampler_sample_hist(&s, pos, 3, hist, 3) == 1, "a positive logit is divided");
    T_CHECK(sampler_sample_hist(&s, neg, 3, hist, 3) == 1, "a negative logit is multiplied");
    T_CHECK(pos[0] == 2.0f && neg[0] == -1.0f, "the logits are not modified");
    s.p.repeat_last_n = 1; /* only the last token (2) is penalised */
    T_CHECK(sampler_sample_hist(&s, pos, 3, hist, 3) == 0, "repeat_last_n limits the window");
    s.p.repeat_last_n = 0;
    T_CHECK(sampler_sample_hist(&s, pos, 3, hist, 3) == 0, "repeat_last_n 0 turns it off");
    sampler_free(&s);
    /* off: the same draws as sampler_sample */
    sample_params a = sample_default_params();
    sampler s1, s2;
    sampler_init(&s1, &a, 3);
    sampler_init(&s2, &a, 3);
    bool same = true;
    for (int i = 0; i < 200; i++) {
        float lg[3] = {0.3f * (float)(i % 5), 0.5f, 0.1f * (float)(i % 7)};
        same = same && sampler_sample(&s1, lg, 3) == sampler_sample_hist(&s2, lg, 3, hist, 3);
    }
    T_CHECK(same, "penalty 1: sampler_sample_hist draws exactly as sampler_sample");
    sampler_free(&s1);
    sampler_free(&s2);
}

static void test_errors(const model *m) {
    forest *f = forest_init(64, 0);
    st_err err = {0};
    int32_t toks[2] = {1, 5};
    forest_id last;
    forest_add_root(f, toks, NULL, 2, 0, &last, &err);
    sample_params sp = sample_default_params();
    cot c;
    T_CHECK(cot_init(&c, f, last, 0, &sp, 8, m->hp.n_vocab, &err) == ST_ERR_ARG, "k = 0 refused");
    T_CHECK(cot_init(&c, f, last, m->hp.n_vocab + 1, &sp, 8, m->hp.n_vocab, &err) == ST_ERR_ARG,
            "k > vocabulary refused");
    cot_free(&c);
    forest_free(f);
}

int main(void) {
    test_vote();
    test_penalty();
    mkmodel_params mp = mkmodel_default_params();
    mp.n_ctx = 1024;
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "random model: %s", err.msg);
    if (m) {
        test_errors(m);
        int32_t prompt[5] = {1, 300, 17, 42, 99};
        sample_params sp = sample_default_params();
        check_against_linear(m, NULL, prompt, 5, &sp, 8, 24, "random sampled k=8");
        sp.temp = 1.5f, sp.top_k = 0, sp.top_p = 1.0f, sp.min_p = 0, sp.seed = 99;
        check_against_linear(m, NULL, prompt, 5, &sp, 16, 20, "random wide k=16");
        sp.repeat_penalty = 1.5f, sp.repeat_last_n = 8;
        check_against_linear(m, NULL, prompt, 5, &sp, 4, 24, "random penalty k=4");
        sp = sample_default_params();
        sp.temp = 0;
        check_against_linear(m, NULL, prompt, 5, &sp, 16, 16, "random greedy k=16");
        check_k1(m, NULL, prompt, 5, &sp, "random greedy");
        sp = sample_default_params();
        check_k1(m, NULL, prompt, 5, &sp, "random sampled");
        model_free(m);
    }
    const char *spath = t_shared("models/stories260K.gguf");
    if (!spath) {
        T_MISSING("stories260K fixture absent");
        return t_done();
    }
    m = model_load(spath, &err);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(m && tk, "stories260K: %s", err.msg);
    if (m && tk) {
        int32_t prompt[64];
        const char *text = "Once upon a time, there was a little dog named Max. He";
        int32_t P = tok_encode(tk, text, strlen(text), true, false, prompt, 64);
        sample_params sp = sample_default_params();
        check_against_linear(m, tk, prompt, P, &sp, 8, 128, "stories260K sampled k=8");
        sp.repeat_penalty = 1.3f;
        check_against_linear(m, tk, prompt, P, &sp, 4, 64, "stories260K penalty k=4");
        sp = sample_default_params();
        sp.temp = 0;
        check_against_linear(m, tk, prompt, P, &sp, 8, 64, "stories260K greedy k=8");
        check_k1(m, tk, prompt, P, &sp, "stories260K greedy");
        check_stop(m, tk, prompt, P);
    }
    tok_free(tk);
    model_free(m);
    return t_done();
}
