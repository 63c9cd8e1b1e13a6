/* test_margins.c - Writing in the Margins over one forest, on stories260K with the first
 * few KB of a TinyStories text.
 *
 * Checks: the first step prefills the shared prefix once and every chunk's prompt (KV
 * slots used = shared prefix + the rest of every prompt); every later note step computes
 * exactly one row per running note; every chunk gets a note; each note is what greedy
 * linear decoding of its own prompt writes; after the merge the final answer branch's
 * logits equal (bitwise) linear decoding of its full path, whose text holds the notes;
 * the forest's invariants hold after every step. The experimental rope-gap answer runs
 * (its output is only measured, in test_merge). */
#include <string.h>

#include "strategy/margins.h"
#include "t.h"
#include "t_model.h"

#define MAXSEQ 2048


static int32_t enc(const tok *tk, const char *s, bool bos, int32_t *out, int32_t cap) {
    return tok_encode(tk, s, strlen(s), bos, false, out, cap);
}

/* Greedy linear decoding of prompt[0..n) for up to budget tokens (stopping at EOG). */
static int32_t linear_greedy(model_ctx *lc, const tok *tk, const int32_t *prompt, int32_t n,
                             int32_t budget, int32_t *out) {
    int32_t seq[MAXSEQ], V = model_ctx_hparams(lc)->n_vocab, k = 0;
    float *lg = malloc(sizeof(float) * (size_t)V);
    st_err err = {0};
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)n);
    model_forward_linear(lc, seq, n, 0, lg, &err);
    while (k < budget) {
        int32_t t = sample_argmax(lg, V);
        if (tok_is_eog(tk, t)) break;
        seq[n + k] = out[k] = t;
        k++;
        if (k == budget) break;
        model_forward_linear(lc, &seq[n + k - 1], 1, n + k - 1, lg, &err);
    }
    free(lg);
    return k;
}

typedef struct setup {
    int32_t *prompts[16];
    int32_t lens[16];
    int32_t n;
    int32_t head[64], n_head; /* BOS + the question part */
} setup;

static void build(setup *s, const tok *tk, const char *text, int32_t chunk) {
    static int32_t ctx[4096];
    int32_t nc = enc(tk, text, false, ctx, 4096), tail[32];
    s->n_head = enc(tk, "Question: Who went to the park?\n\n", true, s->head, 64);
    int32_t n_tail = enc(tk, "\n\nNote:", false, tail, 32);
    s->n = 0;
    for (int32_t at = 0; at < nc && s->n < 16; at += chunk) {
        int32_t len = nc - at < chunk ? nc - at : chunk;
        int32_t *p = malloc(sizeof(int32_t) * (size_t)(s->n_head + len + n_tail));
        memcpy(p, s->head, sizeof(int32_t) * (size_t)s->n_head);
        memcpy(p + s->n_head, ctx + at, sizeof(int32_t) * (size_t)len);
        memcpy(p + s->n_head + len, tail, sizeof(int32_t) * (size_t)n_tail);
        s->prompts[s->n] = p;
        s->lens[s->n++] = s->n_head + len + n_tail;
    }
}

static void run(const model *m, const tok *tk, const setup *s, bool rope_gap) {
    int32_t V = m->hp.n_vocab, NOTE = 24, ANS = 24;
    const char *name = rope_gap ? "rope-gap" : "exact";
    model_ctx *c = t_new_ctx(m, 4096), *lc = t_new_ctx(m, 4096);
    forest *f = forest_init(4096, 0);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    sample_params sp = sample_default_params();
    sp.temp = 0;
    margins mg;
    T_CHECK(margins_init(&mg, f, (const int32_t *const *)s->prompts, s->lens, s->n, &sp, NOTE, V,
                         &err) == ST_OK, "init: %s", err.msg);
    T_CHECK(mg.n_shared == s->n_head, "%s: the shared prefix is the question part (%d vs %d)", name,
            mg.n_shared, s->n_head);
    int32_t steps = 0, total = mg.n_shared;
    for (int32_t i = 0; i < s->n; i++) total += s->lens[i] - mg.n_shared;
    bool rows_ok = true;
    while (mg.phase == MARGINS_NOTES) {
        int32_t before = mg.notes.n_active;
        st_code rc = margins_step(&mg, f, &p, c, tk, NULL, NULL, NULL, &err);
        T_CHECK(rc == ST_OK, "note step: %s", err.msg);
        if (rc) break;
        if (steps == 0) {
            T_CHECK(p.n_rows == total && kv_alloc_used(forest_kv(f)) == total,
                    "%s: the first step prefills the prefix once and every chunk (%d rows, %d slots, "
                    "want %d)", name, p.n_rows, kv_alloc_used(forest_kv(f)), total);
        } else if (p.n_rows != before) {
            rows_ok = false;
            fprintf(stderr, "step %d: %d rows, %d notes running\n", steps, p.n_rows, before);
        }
        st_err e2 = {0};
        if (forest_check(f, &e2)) T_CHECK(0, "invariants: %s", e2.msg);
        steps++;
    }
    T_CHECK(rows_ok, "%s: every note step computes one row per running note", name);
    T_CHECK(mg.phase == MARGINS_READY, "notes done");
    bool notes_ok = true, linear_ok = true;
    for (int32_t i = 0; i < s->n; i++) {
        char *t = margins_note_text(&mg, f, tk, i, &err);
        if (!t || mg.notes.br[i].made == 0) notes_ok = false;
        if (i < 3 && !rope_gap) fprintf(stderr, "note %d: %s\n", i, t ? t : "(null)");
        free(t);
        int32_t ref[64], got[64];
        int32_t nr = linear_greedy(lc, tk, s->prompts[i], s->lens[i], NOTE, ref);
        int32_t path[MAXSEQ], np = forest_path(f, mg.notes.br[i].leaf, path, MAXSEQ);
        int32_t ng = np - s->lens[i];
        memcpy(got, path + s->lens[i], sizeof(int32_t) * (size_t)(ng > 0 ? ng : 0));
        if (ng != nr || memcmp(got, ref, sizeof(int32_t) * (size_t)nr)) linear_ok = false;
    }
    T_CHECK(notes_ok, "%s: a note for each of the %d chunks", name, s->n);
    T_CHECK(linear_ok, "%s: each note is greedy linear decoding of its own prompt", name);

    char *notes = margins_notes_text(&mg, f, tk, NULL, &err);
    T_CHECK(notes != NULL, "notes text");
    if (!rope_gap) {
        /* the final prompt: question part + "Notes:\n" + notes + "\n\nAnswer:" */
        size_t L = strlen(notes) + 64;
        char *txt = malloc(L);
        snprintf(txt, L, "Question: Who went to the park?\n\nNotes:\n%s\n\nAnswer:", notes);
        int32_t fin[MAXSEQ];
        int32_t nf = enc(tk, txt, true, fin, MAXSEQ);
        free(txt);
        T_CHECK(margins_answer(&mg, f, fin, nf, &sp, ANS, &err) == ST_OK, "answer: %s", err.msg);
        int32_t path[MAXSEQ], np = forest_path(f, mg.answer_from, path, MAXSEQ);
        T_CHECK(np == nf && !memcmp(path, fin, sizeof(int32_t) * (size_t)nf),
                "the answer's path is its prompt, sharing the prefix");
        T_CHECK(margins_step(&mg, f, &p, c, tk, NULL, NULL, NULL, &err) == ST_OK, "answer step");
        const float *lg = step_logits_of(&p, mg.answer_from);
        float *ref = malloc(sizeof(float) * (size_t)V);
        model_forward_linear(lc, path, np, 0, ref, &err);
        T_CHECK(lg && !memcmp(lg, ref, sizeof(float) * (size_t)V),
                "the final answer branch's logits equal linear decoding of its full path");
        free(ref);
    } else {
        int32_t tail[32];
        int32_t nt = enc(tk, "\n\nAnswer:", false, tail, 32);
        T_CHECK(margins_answer_gap(&mg, f, &p, c, tail, nt, 8, &sp, ANS, &err) == ST_OK,
                "rope-gap answer: %s", err.msg);
    }
    /* each answer token's log-probability is bitwise the step's own (its top-1, greedy) */
    p.top_k = 1;
    bool lp_same = true;
    int32_t n_lp = 0;
    while (!margins_done(&mg)) {
        forest_id prev = mg.answer.br[0].leaf;
        st_code rc = margins_step(&mg, f, &p, c, tk, NULL, NULL, NULL, &err);
        if (rc) {
            T_CHECK(0, "answer step: %s", err.msg);
            break;
        }
        const forest_node *nd = forest_get(f, mg.answer.br[0].leaf);
        const int32_t *ids;
        const float *lp;
        if (mg.answer.br[0].leaf != prev && nd && step_topk_of(&p, prev, &ids, &lp) == 1) {
            n_lp++;
            lp_same = lp_same && ids[0] == nd->token && lp[0] == nd->logprob &&
                      lp[0] == step_logprob_of(&p, prev, nd->token);
        }
    }
    T_CHECK(n_lp > 0 && lp_same, "%s: the answer's %d log-probabilities are bitwise the step's", name, n_lp);
    st_err e2 = {0};
    T_CHECK(forest_check(f, &e2) == ST_OK, "%s: invariants at the end: %s", name, e2.msg);
    T_CHECK(mg.answer.br[0].made > 0 || mg.answer.br[0].eog, "%s: an answer", name);
    char *ans = merge_branch_text(f, tk, mg.answer_from, mg.answer.br[0].leaf, &err);
    fprintf(stderr, "%s answer: %s\n", name, ans ? ans : "(null)");
    free(ans);
    free(notes);
    margins_free(&mg);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    model_ctx_free(lc);
}

/* Removes s's spaces in place (a chunk decoded on its own loses the space it starts with). */
static char *unspaced(char *s) {
    char *o = s;
    for (const char *i = s; *i; i++)
        if (*i != ' ') *o++ = *i;
    *o = 0;
    return s;
}

/* margins_chunk_prompt, the one cut of a text into note requests: every request is in
 * the plain form, and their chunks put together are the whole text decoded (spaces
 * aside). */
static void check_chunk_prompts(const tok *tk, const char *text) {
    static int32_t ctx[4096];
    static char joined[16384];
    int32_t nc = enc(tk, text, false, ctx, 4096), n = (nc + 127) / 128;
    char *whole = tok_decode_str(tk, ctx, nc);
    bool form = n >= 2;
    joined[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        char *p = margins_chunk_prompt(tk, ctx, nc, 128, i, "Who?", false);
        const char *a = p ? strstr(p, "\n\nText: ") : NULL, *b = a ? strstr(a, "\n\nNote:") : NULL;
        form = form && a && b && !strncmp(p, "Question: Who?", 14) && !strcmp(b, "\n\nNote:");
        if (a && b) strncat(joined, a + 8, (size_t)(b - a - 8));
        free(p);
    }
    T_CHECK(form && whole && !strcmp(unspaced(joined), unspaced(whole)), "%d chunk requests: the plain form, the chunks the whole text",
            (int)n);
    free(whole);
}

int main(void) {
    char spath[4096] = "", tpath[4096] = ""; /* t_shared's buffer is reused */
    if (t_shared("models/stories260K.gguf")) snprintf(spath, sizeof spath, "%s", t_shared("models/stories260K.gguf"));
    if (t_shared("models/tinystories_val_subset.txt"))
        snprintf(tpath, sizeof tpath, "%s", t_shared("models/tinystories_val_subset.txt"));
    if (!spath[0] || !tpath[0]) {
        T_MISSING("stories260K or the TinyStories text is absent");
        return t_done();
    }
    char text[3001];
    FILE *fp = fopen(tpath, "rb");
    size_t n = fp ? fread(text, 1, 2000, fp) : 0;
    if (fp) fclose(fp);
    text[n] = 0;
    T_CHECK(n > 1000, "the text");
    st_err err = {0};
    model *m = model_load(spath, &err);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(m && tk, "stories260K: %s", err.msg);
    if (m && tk) {
        check_chunk_prompts(tk, text);
        setup s;
        build(&s, tk, text, 128);
        T_CHECK(s.n >= 4, "several chunks (%d)", s.n);
        run(m, tk, &s, false);
        run(m, tk, &s, true);
        /* refusals */
        forest *f = forest_init(64, 0);
        margins mg;
        sample_params sp = sample_default_params();
        int32_t zero = 0;
        T_CHECK(margins_init(&mg, f, (const int32_t *const *)s.prompts, &zero, 1, &sp, 4,
                             m->hp.n_vocab, &err) == ST_ERR_ARG && forest_n_live(f) == 0,
                "an empty prompt is refused, nothing added");
        margins_free(&mg);
        forest_free(f);
        for (int32_t i = 0; i < s.n; i++) free(s.prompts[i]);
    }
    tok_free(tk);
    model_free(m);
    return t_done();
}
