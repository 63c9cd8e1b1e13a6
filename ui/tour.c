/* tour.c - the guided tour (tour.h): three steps run on a private forest, captured as
 * mask views, then written out as screens of plain text that name what was built. */
#include "tour.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forest/step.h"
#include "forest_view.h"
#include "rope_view.h"

#define TOUR_TOPK 8
#define TOUR_GRID 56 /* columns a screen's mask grid may take */

enum { SCR_FOREST, SCR_PREFILL, SCR_FORK, SCR_GROW, SCR_WEIGHTS, SCR_ROPE, SCR_TRY, N_SCREENS };

struct tour {
    forest *f;
    mask_view *step[TOUR_STEPS];
    char *screen[N_SCREENS];
    const tok *tk;        /* borrowed while building */
    int32_t n_prompt;     /* the prompt's tokens */
    int32_t fork_tok[2];  /* the two likeliest next tokens */
    float fork_p[2];      /* and their probabilities */
    int32_t n_layer;
    float rope_base;
    float rope_base_swa;  /* the windowed layers' base, when they have their own (else 0) */
    int32_t rope_dim;
};

void tour_free(tour *t) {
    if (!t) return;
    forest_free(t->f);
    for (int32_t s = 0; s < TOUR_STEPS; s++) free(t->step[s]);
    for (int32_t i = 0; i < N_SCREENS; i++) free(t->screen[i]);
    free(t);
}

int32_t tour_n_screens(const tour *t) { return t ? N_SCREENS : 0; }
const char *tour_screen(const tour *t, int32_t i) { return t && i >= 0 && i < N_SCREENS ? t->screen[i] : NULL; }
const forest *tour_forest(const tour *t) { return t->f; }
const mask_view *tour_step(const tour *t, int32_t s) { return s >= 0 && s < TOUR_STEPS ? t->step[s] : NULL; }

/* ---- the steps ---- */

/* Runs the pending nodes as step s and captures it. */
static st_code run_step(tour *t, model_ctx *c, step_plan *p, int32_t s, const char *kind, st_err *err) {
    st_code rc = step_forest(t->f, p, c, err);
    if (rc) return rc;
    mv_init(t->step[s]);
    mv_capture(t->step[s], t->f, t->tk, p, s);
    mv_set_kind(t->step[s], kind);
    t->step[s]->rope_base = t->rope_base, t->step[s]->rope_dim = t->rope_dim;
    return ST_OK;
}

/* The two likeliest next tokens after node (end-of-generation ones skipped) into
 * toks/probs; false when fewer are kept. */
static bool top_two(const tour *t, forest_id node, int32_t toks[2], float probs[2]) {
    int32_t ids[TOUR_TOPK], n = 0;
    float lps[TOUR_TOPK];
    int32_t k = forest_topk(t->f, node, ids, lps, TOUR_TOPK);
    for (int32_t i = 0; i < k && n < 2; i++)
        if (!tok_is_eog(t->tk, ids[i])) toks[n] = ids[i], probs[n++] = expf(lps[i]);
    return n == 2;
}

/* The prompt, then the fork into its two likeliest next tokens, then each branch's
 * likeliest next token. */
static st_code run_steps(tour *t, model_ctx *c, const int32_t *toks, step_plan *p, st_err *err) {
    forest_id last, leaf[2];
    st_code rc = forest_add_root(t->f, toks, NULL, t->n_prompt, 0, &last, err);
    if (!rc) rc = run_step(t, c, p, 0, "prefill", err);
    if (!rc && !top_two(t, last, t->fork_tok, t->fork_p))
        rc = st_set(err, ST_ERR_ARG, "the tour: the model gave fewer than two next tokens");
    for (int32_t b = 0; b < 2 && !rc; b++) rc = forest_append(t->f, last, &t->fork_tok[b], NULL, 1, &leaf[b], err);
    if (!rc) rc = run_step(t, c, p, 1, "fork", err);
    for (int32_t b = 0; b < 2 && !rc; b++) {
        int32_t next[2];
        float pr[2];
        if (!top_two(t, leaf[b], next, pr))
            rc = st_set(err, ST_ERR_ARG, "the tour: the model gave no next token");
        else rc = forest_append(t->f, leaf[b], next, NULL, 1, NULL, err);
    }
    if (!rc) rc = run_step(t, c, p, 2, "grow", err);
    return rc;
}

/* ---- the screens ---- */

/* The text of the token in KV slot s (in context), "?" when no node holds it. */
static void slot_text(const tour *t, int32_t s, char *out, size_t cap) {
    snprintf(out, cap, "?");
    for (int32_t i = 0; i < forest_capacity(t->f); i++) {
        const forest_node *nd = forest_node_at(t->f, i);
        if (nd->state == FOREST_COMPUTED && nd->kv_slot == s) fv_token_text(t->f, t->tk, i, out, cap);
    }
}

static void put_rows(FILE *fp, const mask_view *v) {
    for (int32_t r = 0; r < v->n_rows; r++) {
        const mv_row *row = &v->rows[r];
        fprintf(fp, "  row %d: \"%s\"  pos %d  slot %d%s\n", r, row->text, row->pos, row->slot,
                row->want ? "  -> logits" : "");
    }
}

/* The mask as a grid: '#' where the row may attend, '.' where not, one column per KV slot
 * (a run of the shared prompt's slots as one '=' column when it is wide). */
static void put_grid(FILE *fp, const tour *t, mask_view *v) {
    char line[512];
    mv_layout(v, TOUR_GRID);
    mv_slot_line(v, 0, TOUR_GRID, line, sizeof line, false);
    fprintf(fp, "  slot   %s\n", line);
    for (int32_t r = 0; r < v->n_rows; r++) {
        fprintf(fp, "  row %-2d ", r);
        for (int32_t d = 0; d < v->n_dcols && d < TOUR_GRID; d++) fputc(mv_cell(v, r, d), fp);
        fputc('\n', fp);
    }
    fprintf(fp, "  columns:");
    int col = 10;
    for (int32_t d = 0; d < v->n_dcols; d++) {
        if (v->dcols[d].n == 0) continue;
        char slots[32], text[40], item[96];
        mv_dcol_text(v, d, slots, sizeof slots);
        if (v->dcols[d].n > 1) snprintf(text, sizeof text, "the prompt");
        else slot_text(t, v->cols[v->dcols[d].col], text, sizeof text);
        snprintf(item, sizeof item, " slot %s \"%s\"%s", slots, text, d + 1 < v->n_dcols ? "," : "");
        if (col + (int)strlen(item) > 78) fprintf(fp, "\n          "), col = 10;
        fputs(item, fp);
        col += (int)strlen(item);
    }
    fputc('\n', fp);
}

static void scr_forest(FILE *fp, const tour *t) {
    const mask_view *v = t->step[0];
    fprintf(fp, "The tour, 1 of %d: a prompt is a chain of tokens\n\n", N_SCREENS);
    fprintf(fp, "The prompt is %d tokens. multidecode keeps every token as a node of a tree\n"
                "(a forest when there are several trees). A node is computed once: its keys and\n"
                "values (K, V) go into one KV slot of the cache, and every later token on its\n"
                "path reads them from there. The prompt's tokens, in order:\n\n", t->n_prompt);
    for (int32_t r = 0; r < v->n_rows; r++)
        fprintf(fp, "  \"%s\"%s", v->rows[r].text, r + 1 < v->n_rows ? (r % 6 == 5 ? "\n" : " ->") : "\n");
    fprintf(fp, "\nThe next screens run three steps on this prompt, as the TUI does: a step is\n"
                "one forward pass of the model over a batch of rows, one row per token.\n");
}

/* Step s's screen: its title, lead, rows, middle, mask grid and end, in that order. */
static void put_step(FILE *fp, const tour *t, int32_t s, const char *title, const char *lead, const char *middle,
                     const char *end) {
    mask_view *v = t->step[s];
    fprintf(fp, "The tour, %d of %d: step %d, %s (%d rows)\n\n%s", s + 2, N_SCREENS, s, title, v->n_rows, lead);
    put_rows(fp, v);
    fprintf(fp, "\n%s", middle);
    put_grid(fp, t, v);
    fprintf(fp, "\n%s", end);
}

static void scr_prefill(FILE *fp, const tour *t) {
    const mask_view *v = t->step[0];
    char mid[512];
    snprintf(mid, sizeof mid,
             "Each row is one token. pos is its RoPE position: how deep it sits in the tree\n"
             "(the first token is at 0). slot is where its K and V are kept. Only row %d,\n"
             "\"%s\", returns logits: the model's guess at the token after it.\n\n"
             "The mask says which slots each row may attend to ('#'):\n", v->n_rows - 1, v->rows[v->n_rows - 1].text);
    put_step(fp, t, 0, "the prefill", "", mid,
             "A triangle: each token sees itself and the tokens before it, never after.\n"
             "That is plain causal attention, as any language model decodes.\n");
}

static void scr_fork(FILE *fp, const tour *t) {
    const mv_row *a = &t->step[1]->rows[0], *b = &t->step[1]->rows[1];
    char parent[40], lead[512], mid[512];
    slot_text(t, t->step[0]->rows[t->step[0]->n_rows - 1].slot, parent, sizeof parent);
    snprintf(lead, sizeof lead,
             "After \"%s\" the model's two likeliest tokens are \"%s\" (%.0f%%) and \"%s\"\n"
             "(%.0f%%). Both become children of \"%s\", and one step computes both:\n\n",
             parent, a->text, 100 * t->fork_p[0], b->text, 100 * t->fork_p[1], parent);
    snprintf(mid, sizeof mid,
             "Siblings share a position: rows 0 and 1 are both at pos %d, token number %d of\n"
             "their sequence, so RoPE turns them alike. They do not share a slot: row 0's K\n"
             "and V go to slot %d, row 1's to slot %d (the middle of the free cache, so each\n"
             "branch can grow as one run of slots).\n\nThe mask:\n", a->pos, a->pos + 1, a->slot, b->slot);
    put_step(fp, t, 1, "a fork", lead, mid,
             "Both rows see the prompt's slots (computed once, shared), each sees its own\n"
             "slot, and neither sees the other's: two sequences, as if decoded alone.\n");
}

static void scr_grow(FILE *fp, const tour *t) {
    char mid[512];
    snprintf(mid, sizeof mid,
             "One step further down the tree, one position further: pos %d for both. Each\n"
             "row has its own parent: row 0's is slot %d, row 1's slot %d. The mask:\n",
             t->step[2]->rows[0].pos, t->step[1]->rows[0].slot, t->step[1]->rows[1].slot);
    put_step(fp, t, 2, "both branches grow", "Each branch gets its likeliest next token, again in one step:\n\n", mid,
             "Each row sees the shared prompt and its own branch (its parent and itself),\n"
             "never the other branch. This is a tree mask: many sequences in one pass.\n");
}

/* Row r's weights of step 2, one "token weight" per slot it sees, wrapped. */
static void put_weights(FILE *fp, const tour *t, const mask_view *v, int32_t r) {
    int col = fprintf(fp, "  row %d \"%s\":", r, v->rows[r].text);
    double sum = 0;
    for (int32_t c = 0; c < v->n_cols; c++) {
        if (!mv_sees(v, r, c)) continue;
        char text[40], item[64];
        double w = v->attn[r][c] / 65535.0;
        sum += w;
        slot_text(t, v->cols[c], text, sizeof text);
        snprintf(item, sizeof item, " \"%s\" %.2f", text, w);
        if (col + (int)strlen(item) > 78) fprintf(fp, "\n     "), col = 5;
        fputs(item, fp);
        col += (int)strlen(item);
    }
    fprintf(fp, "  (sum %.2f)\n", sum);
}

static void scr_weights(FILE *fp, const tour *t) {
    const mask_view *v = t->step[2];
    fprintf(fp, "The tour, 5 of %d: attention weights\n\n", N_SCREENS);
    fprintf(fp, "The mask says where a row may look; the weights say where it does. In layer %d\n"
                "(the last; the mean of its heads), step 2's rows spread their attention so:\n\n",
            v->attn_layer);
    for (int32_t r = 0; r < v->n_rows; r++) put_weights(fp, t, v, r);
    fprintf(fp, "\nEach row's weights sum to 1 over exactly the slots its mask allows: the other\n"
                "branch gets nothing, not even a little. In the TUI's mask pane (v), A shows\n"
                "these weights as bars in the cells; < and > change the layer, H the head.\n");
}

static void scr_rope(FILE *fp, const tour *t) {
    const mask_view *v = t->step[2];
    char line[160];
    fprintf(fp, "The tour, 6 of %d: RoPE, what the position does\n\n", N_SCREENS);
    fprintf(fp, "pos = RoPE position = depth in the tree. Before attention, RoPE turns each\n"
                "pair k of a head's query and key by the angle pos x theta_k, with\n"
                "theta_k = base^(-2k/d) (here base %.0f, d = %d): pair 0 turns one radian a\n"
                "position, later pairs slower. The first %d pairs of step 2's row 0, in degrees:\n\n",
            t->rope_base, t->rope_dim, RV_PAIRS);
    for (int i = 0; i < 3; i++)
        if (rv_view_line(v, 0, i, line, sizeof line, 76, false)) fprintf(fp, "  %s\n", line);
    if (t->rope_base_swa > 0)
        fprintf(fp, "\n(These are the global layers' angles; the sliding-window layers turn with\nbase %.0f, by the same rule.)\n",
                t->rope_base_swa);
    fprintf(fp, "\nRow 1, in the other branch at the same position, turns exactly as row 0 does;\n"
                "the parent, one position less, one step less. A score q.k depends only on\n"
                "the difference of the two positions, so both branches see the prompt from\n"
                "the same distance, as if each were the only continuation.\n");
}

static void scr_try(FILE *fp) {
    fprintf(fp, "The tour, 7 of %d: try it\n\n", N_SCREENS);
    fprintf(fp, "In the TUI (default keys): c forks the selected node into chains, n grows\n"
                "it, v shows the mask pane of the last step (its rows, positions, slots and\n"
                "mask, as here) and Tab moves there. In it A adds the attention weights from\n"
                "the next step on, [ and ] go back and forth through the last steps, and R\n"
                "turns the selected row by RoPE beside its parent and another branch.\n"
                ":export FILE.svg draws the forest and the mask as a picture.\n\n"
                "From the shell: multidecode plan -m MODEL -p TEXT -k 2 -s 3 --attn L\n"
                "prints each step's rows and mask; --slide FILE.svg makes the picture.\n");
}

/* Writes every screen; false when memory runs out. */
static bool write_screens(tour *t) {
    for (int32_t i = 0; i < N_SCREENS; i++) {
        size_t n = 0;
        FILE *fp = open_memstream(&t->screen[i], &n);
        if (!fp) return false;
        switch (i) {
        case SCR_FOREST: scr_forest(fp, t); break;
        case SCR_PREFILL: scr_prefill(fp, t); break;
        case SCR_FORK: scr_fork(fp, t); break;
        case SCR_GROW: scr_grow(fp, t); break;
        case SCR_WEIGHTS: scr_weights(fp, t); break;
        case SCR_ROPE: scr_rope(fp, t); break;
        default: scr_try(fp); break;
        }
        if (fclose(fp)) return false;
    }
    return true;
}

tour *tour_build(model_ctx *c, const tok *tk, const char *prompt, st_err *err) {
    tour *t = calloc(1, sizeof *t);
    const model_hparams *hp = model_ctx_hparams(c);
    int32_t n = 0, *toks = t ? tok_encode_alloc(tk, prompt, strlen(prompt), tok_add_bos(tk), false, &n, err) : NULL;
    step_plan p;
    step_plan_init(&p);
    st_code rc = !t ? st_set(err, ST_ERR_NOMEM, "out of memory for the tour") : !toks ? err->code : ST_OK;
    if (!rc && (n == 0 || n + 4 > model_ctx_n_slots(c)))
        rc = st_set(err, ST_ERR_ARG, "the tour's prompt must have 1 to %d tokens (it has %d)",
                    model_ctx_n_slots(c) - 4, n);
    if (!rc) {
        t->tk = tk, t->n_prompt = n, t->n_layer = hp->n_layer;
        t->rope_base = hp->rope_base, t->rope_dim = hp->rope_dim;
        t->rope_base_swa = hp->n_swa > 0 && hp->rope_base_swa != hp->rope_base ? hp->rope_base_swa : 0;
        t->f = forest_init(model_ctx_n_slots(c), TOUR_TOPK);
        for (int32_t s = 0; s < TOUR_STEPS; s++) t->step[s] = malloc(sizeof(mask_view));
        bool ok = t->f;
        for (int32_t s = 0; s < TOUR_STEPS; s++) ok = ok && t->step[s];
        if (!ok) rc = st_set(err, ST_ERR_NOMEM, "out of memory for the tour");
    }
    p.attn_want = true, p.attn_layer = hp->n_layer - 1, p.attn_head = -1;
    if (!rc) rc = run_steps(t, c, toks, &p, err);
    if (!rc && !write_screens(t)) rc = st_set(err, ST_ERR_NOMEM, "out of memory for the tour's screens");
    step_plan_free(&p);
    free(toks);
    if (rc) {
        tour_free(t);
        return NULL;
    }
    t->tk = NULL;
    return t;
}
