/* session_md.c - the Markdown export of a forest (session_export_markdown in session.h).
 *
 * Every node's text is decoded once, in DFS order, by the streaming decoder started from
 * a copy of its parent's decoder state, so a token reads exactly as it does in its own
 * root-to-node sequence (a character split across byte tokens lands on the node that
 * completes it). The outline then prints runs of single-child nodes as list items nested
 * under their branch point, and each branch section prints only the text the branch adds
 * to the branches before it.
 *
 * Without a tokenizer the texts come from the branch texts the file was saved with (one
 * per leaf): a node with several children ends before the last space of what its leaves'
 * texts share, so a run's text may start off a token boundary (a word the branches share
 * the start of is written in each), but every branch reads whole. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/outfile.h"
#include "session/session.h"
#include "strategy/grow.h"

#define MD_TAIL 48 /* bytes of shared text quoted before a branch's own text */

typedef struct md_doc {
    const forest *f;
    const session_meta *meta; /* the nodes' scores; may be NULL */
    int32_t cap;       /* forest capacity: the per-index arrays below have this length */
    char *text;        /* all node texts, back to back */
    size_t n_text, cap_text;
    size_t *off;       /* (cap) each node's text in `text` */
    size_t *len;       /* (cap) */
    int32_t *owner;    /* (cap) the branch (1-based) that first reaches the node */
    int32_t *level;    /* (cap) outline nesting level of the node's run */
} md_doc;

static bool md_append(md_doc *d, const char *s, size_t n) {
    if (!ARR_GROW(d->text, d->n_text + n + 1, d->cap_text)) return false;
    memcpy(d->text + d->n_text, s, n);
    d->n_text += n;
    return true;
}

/* Decodes every live node's own text (see the file comment). */
static bool md_decode(md_doc *d, const tok *tk) {
    tok_stream *st = malloc(sizeof *st * (size_t)(d->cap ? d->cap : 1));
    char small[256], *big = NULL;
    bool ok = st != NULL;
    for (int32_t i = forest_dfs_first(d->f); ok && i >= 0; i = forest_dfs_next(d->f, i)) {
        const forest_node *n = forest_node_at(d->f, i);
        d->off[i] = d->n_text;
        if (!tk) {
            int k = snprintf(small, sizeof small, "%s[%" PRId32 "]", n->parent >= 0 ? " " : "",
                             n->token);
            ok = md_append(d, small, (size_t)k);
            d->len[i] = d->n_text - d->off[i];
            continue;
        }
        if (n->parent >= 0) st[i] = st[n->parent];
        else tok_stream_init(&st[i]);
        size_t k = tok_stream_put(tk, &st[i], n->token, small, sizeof small);
        const char *s = small;
        if (k >= sizeof small) { /* not consumed: retry with room for it */
            free(big);
            if (!(big = malloc(k + 1))) { ok = false; break; }
            k = tok_stream_put(tk, &st[i], n->token, big, k + 1);
            s = big;
        }
        ok = md_append(d, s, k);
        if (ok && n->first_child < 0) { /* a leaf: held bytes of a cut character */
            k = tok_stream_flush(tk, &st[i], small, sizeof small);
            ok = k < sizeof small && md_append(d, small, k);
        }
        d->len[i] = d->n_text - d->off[i];
    }
    free(st);
    free(big);
    return ok;
}

/* A byte of a word: a letter, a digit or part of a character beyond ASCII. */
static bool md_word_char(char c) {
    unsigned char u = (unsigned char)c;
    return u >= 0x80 || (u >= '0' && u <= '9') || ((u | 0x20) >= 'a' && (u | 0x20) <= 'z');
}

/* The node texts from the saved branch texts (see the file comment): plen[i] is the length
 * of node i's root-to-node text within its first leaf's text, found children first. */
static bool md_from_branches(md_doc *d, char *const *text) {
    int32_t n = 0;
    for (int32_t i = forest_dfs_first(d->f); i >= 0; i = forest_dfs_next(d->f, i)) n++;
    int32_t *order = malloc(sizeof *order * (size_t)(n ? n : 1));
    size_t *plen = malloc(sizeof *plen * (size_t)(d->cap ? d->cap : 1));
    bool ok = order && plen;
    n = 0;
    for (int32_t i = forest_dfs_first(d->f); ok && i >= 0; i = forest_dfs_next(d->f, i)) order[n++] = i;
    for (int32_t k = n - 1; ok && k >= 0; k--) {
        int32_t i = order[k];
        const forest_node *nd = forest_node_at(d->f, i);
        const char *mine = text[d->owner[i] - 1];
        if (nd->first_child < 0) {
            plen[i] = strlen(mine);
            continue;
        }
        size_t l = SIZE_MAX;
        for (int32_t c = nd->first_child; c >= 0; c = forest_node_at(d->f, c)->next_sibling) {
            const char *theirs = text[d->owner[c] - 1];
            size_t m = 0; /* the same leaf's text shares all of it: no comparison, so a
                             long chain costs its length once, not once per node */
            if (theirs == mine) m = plen[c];
            else while (m < plen[c] && mine[m] && mine[m] == theirs[m]) m++;
            if (m < l) l = m;
        }
        /* tokens mostly start with their space: the branches part before a space they
         * share ("little" + " girl" / " boy"), and never inside a word ("named" + " Tim." /
         * " Timmy.", not "named Tim" + "." / "my.") */
        bool in_word = l > 0 && md_word_char(mine[l - 1]);
        for (int32_t c = nd->first_child; in_word && c >= 0; c = forest_node_at(d->f, c)->next_sibling) {
            const char *theirs = text[d->owner[c] - 1];
            if (l < plen[c] && md_word_char(theirs[l])) break;
            if (forest_node_at(d->f, c)->next_sibling < 0) in_word = false; /* none goes on */
        }
        if (l > 0 && mine[l - 1] == ' ') l--;
        else if (in_word) {
            size_t sp = l;
            while (sp > 0 && mine[sp] != ' ') sp--;
            if (mine[sp] == ' ') l = sp;
        }
        while (l > 0 && ((unsigned char)mine[l] & 0xC0) == 0x80) l--; /* not inside a character */
        plen[i] = l;
    }
    for (int32_t k = 0; ok && k < n; k++) {
        int32_t i = order[k], p = forest_node_at(d->f, i)->parent;
        size_t from = p >= 0 ? plen[p] : 0;
        d->off[i] = d->n_text;
        ok = md_append(d, text[d->owner[i] - 1] + from, plen[i] - from);
        d->len[i] = d->n_text - d->off[i];
    }
    free(order);
    free(plen);
    return ok;
}

/* Text for a list item: on one line, Markdown punctuation escaped, newlines as arrows. */
static void md_inline(FILE *out, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\n') fputs("\u21b5", out);
        else if (c == '\r' || c == '\t') fputc(' ', out);
        else if (strchr("\\`*_[]<>#|~", c)) fprintf(out, "\\%c", c);
        else fputc(c, out);
    }
}

/* A fenced block that no backtick run inside the text can close. */
static void md_block(FILE *out, const char *s, size_t n) {
    int run = 0, longest = 0;
    for (size_t i = 0; i < n; i++) {
        run = s[i] == '`' ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    int fence = longest >= 3 ? longest + 1 : 3;
    for (int i = 0; i < fence; i++) fputc('`', out);
    fputs("text\n", out);
    fwrite(s, 1, n, out);
    if (n == 0 || s[n - 1] != '\n') fputc('\n', out);
    for (int i = 0; i < fence; i++) fputc('`', out);
    fputs("\n\n", out);
}

static void md_header(FILE *out, const md_doc *d, const session_settings *s,
                      const session_model_id *mid, int32_t n_trees, int32_t n_leaves) {
    fputs("# multidecode session\n\n", out);
    if (mid && (mid->file[0] || mid->sha256[0]))
        fprintf(out, "Model: `%s` (%" PRIu64 " bytes, sha256 `%.16s`)\n\n",
                mid->file[0] ? mid->file : "unnamed", mid->size, mid->sha256);
    if (s)
        fprintf(out, "Sampler: temperature %g, top-k %d, top-p %g, min-p %g, seed %" PRIu64
                     "; chat template: %s.\n\n",
                s->sample.temp, s->sample.top_k, s->sample.top_p, s->sample.min_p,
                s->sample.seed, s->chat_template[0] ? s->chat_template : "none");
    fprintf(out, "%d nodes in %d tree%s, %d branch%s.\n\n", forest_n_live(d->f), n_trees,
            n_trees == 1 ? "" : "s", n_leaves, n_leaves == 1 ? "" : "es");
}

/* How a leaf ended, for its labels: the model finished it, or a grow's budget cut it
 * (both are FOREST_FINISHED: no strategy extends them); NULL for an open leaf. */
static const char *md_ending(const forest_node *n) {
    if (!(n->flags & FOREST_FINISHED)) return NULL;
    return n->tag == GROW_END_BUDGET ? "stopped by the budget" : "finished";
}

/* The nested-list outline of every tree. */
static void md_outline(FILE *out, md_doc *d) {
    const forest *f = d->f;
    int32_t tree = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *n = forest_node_at(f, i);
        /* a run starts at a root and at every child of a node with several children */
        bool starts = n->parent < 0 || forest_node_at(f, n->parent)->first_child != i ||
                      n->next_sibling >= 0;
        if (n->parent < 0) {
            fprintf(out, "%s## Tree %d", tree ? "\n\n" : "", tree + 1);
            if (n->depth) fprintf(out, " (starts at position %d)", n->depth);
            fputs("\n\n", out);
            tree++;
        }
        if (starts) {
            d->level[i] = n->parent < 0 ? 0 : d->level[n->parent] + 1;
            if (n->parent >= 0) fputc('\n', out);
            for (int32_t l = 0; l < d->level[i]; l++) fputs("  ", out);
            fputs("- ", out);
        } else {
            d->level[i] = d->level[n->parent];
        }
        md_inline(out, d->text + d->off[i], d->len[i]);
        if (n->flags & FOREST_BOOKMARK) fputs(" **\u2605 bookmark**", out);
        double score;
        if (session_meta_get_score(d->meta, d->f, forest_id_at(d->f, i), &score)) fprintf(out, " *[score %.4f]*", score);
        if (n->first_child < 0)
            fprintf(out, " \u2014 *branch %d%s%s*", d->owner[i], md_ending(n) ? ", " : "", md_ending(n) ? md_ending(n) : "");
    }
    fputs("\n\n", out);
}

/* One section per branch: what it adds after the part shared with earlier branches. */
static bool md_branches(FILE *out, md_doc *d, const forest_id *leaves, int32_t n_leaves) {
    const forest *f = d->f;
    int32_t maxd = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) maxd++;
    int32_t *path = malloc(sizeof *path * (size_t)(maxd ? maxd : 1));
    char *own = NULL;
    if (!path) return false;
    fputs("## Branches\n\n", out);
    for (int32_t b = 0; b < n_leaves; b++) {
        int32_t np = 0, p = forest_index(leaves[b]);
        while (p >= 0 && d->owner[p] == b + 1) {
            path[np++] = p;
            p = forest_node_at(f, p)->parent;
        }
        /* path[np-1..0] is the branch's own part; p is where it leaves an earlier one */
        bool bookmark = false;
        size_t n_own = 0;
        for (int32_t j = 0; j < np; j++) {
            bookmark |= (forest_node_at(f, path[j])->flags & FOREST_BOOKMARK) != 0;
            n_own += d->len[path[j]];
        }
        char *o = realloc(own, n_own + 1);
        if (!o) break;
        own = o;
        n_own = 0;
        for (int32_t j = np - 1; j >= 0; j--) {
            memcpy(own + n_own, d->text + d->off[path[j]], d->len[path[j]]);
            n_own += d->len[path[j]];
        }
        const forest_node *leaf = forest_node_at(f, path[0]);
        double score;
        char sc[48] = "";
        if (session_meta_get_score(d->meta, f, leaves[b], &score)) snprintf(sc, sizeof sc, " [score %.4f]", score);
        const char *end = md_ending(leaf);
        fprintf(out, "### Branch %d%s%s%s%s%s\n\n", b + 1, bookmark ? " \u2605 bookmark" : "", end ? " (" : "",
                end ? end : "", end ? ")" : "", sc);
        if (p < 0) {
            fputs("From the root of its tree:\n\n", out);
        } else {
            /* the last MD_TAIL bytes of the shared text, cut at a character boundary */
            char tail[MD_TAIL + 1];
            size_t nt = 0;
            for (int32_t q = p; q >= 0 && nt < MD_TAIL; q = forest_node_at(f, q)->parent) {
                size_t l = d->len[q], take = l < MD_TAIL - nt ? l : MD_TAIL - nt;
                memmove(tail + take, tail, nt);
                memcpy(tail, d->text + d->off[q] + l - take, take);
                nt += take;
            }
            size_t s0 = 0;
            while (s0 < nt && ((unsigned char)tail[s0] & 0xC0) == 0x80) s0++;
            fprintf(out, "Continues branch %d after \u201c%s", d->owner[p], nt == MD_TAIL ? "\u2026" : "");
            md_inline(out, tail + s0, nt - s0);
            fputs("\u201d:\n\n", out);
        }
        md_block(out, own, n_own);
    }
    free(own);
    free(path);
    return true;
}

st_code session_export_markdown(FILE *out, const forest *f, const tok *tk,
                                const session_settings *s, const session_model_id *mid,
                                st_err *err) {
    md_doc d = {.f = f, .meta = s ? s->meta : NULL, .cap = forest_capacity(f)};
    size_t cap = (size_t)(d.cap ? d.cap : 1);
    int32_t n_leaves = forest_leaves(f, NULL, 0), n_trees = forest_roots(f, NULL, 0);
    forest_id *leaves = malloc(sizeof *leaves * (size_t)(n_leaves ? n_leaves : 1));
    d.off = malloc(sizeof *d.off * cap);
    d.len = calloc(cap, sizeof *d.len);
    d.owner = calloc(cap, sizeof *d.owner);
    d.level = calloc(cap, sizeof *d.level);
    st_code rc = ST_OK;
    if (!leaves || !d.off || !d.len || !d.owner || !d.level) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory exporting the session");
        goto out;
    }
    forest_leaves(f, leaves, n_leaves);
    /* branch numbers: each node belongs to the first leaf (in DFS order) below it */
    for (int32_t b = 0; b < n_leaves; b++)
        for (int32_t p = forest_index(leaves[b]); p >= 0 && !d.owner[p];
             p = forest_node_at(f, p)->parent)
            d.owner[p] = b + 1;
    /* without a tokenizer: the texts the file was saved with, when there is one a leaf */
    bool saved = !tk && s && n_leaves > 0 && s->n_branch_text == n_leaves;
    if (!(saved ? md_from_branches(&d, s->branch_text) : md_decode(&d, tk))) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory exporting the session");
        goto out;
    }
    md_header(out, &d, s, mid, n_trees, n_leaves);
    md_outline(out, &d);
    if (!md_branches(out, &d, leaves, n_leaves)) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory exporting the session");
        goto out;
    }
    if (fflush(out) || ferror(out)) rc = st_set(err, ST_ERR_IO, "cannot write the Markdown export");
out:
    free(leaves), free(d.off), free(d.len), free(d.owner), free(d.level), free(d.text);
    return rc;
}

st_code session_save_markdown(const char *path, const forest *f, const tok *tk,
                              const session_settings *s, const session_model_id *mid,
                              st_err *err) {
    outfile o;
    st_code rc = outfile_begin(&o, path, "export", err);
    if (rc) return rc;
    if ((rc = session_export_markdown(o.fp, f, tk, s, mid, err))) {
        outfile_abort(&o);
        return rc;
    }
    return outfile_commit(&o, err);
}
