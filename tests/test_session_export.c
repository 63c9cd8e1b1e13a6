/* test_session_export.c - what sessions show and keep beyond their JSON: the Markdown
 * export of a small known forest (its text, its scores, the branches the budget stopped)
 * and the autosave generations (how many are kept, by count and size, and what the start says it drops).
 * Split from test_session.c, which tests the file format itself. */
#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>

#include "forest/forest.h"
#include "session/session.h"
#include "session/autosave.h"
#include "strategy/grow.h"
#include "t.h"

static char tmpdir[64];

/* ---------------- Markdown ---------------- */

static void test_markdown(void) {
    /* a tiny SentencePiece vocabulary that spells a known story */
    const char *pieces[] = {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81Once",
                            "\xe2\x96\x81upon", "\xe2\x96\x81" "a", "\xe2\x96\x81time", ",",
                            "\xe2\x96\x81there", "\xe2\x96\x81was", "\xe2\x96\x81" "cat",
                            "\xe2\x96\x81" "dog", ".", "*"};
    int32_t types[15];
    for (int i = 0; i < 15; i++) types[i] = i < 3 ? TOK_CONTROL : i == 3 ? TOK_BYTE : TOK_NORMAL;
    types[0] = TOK_UNKNOWN;
    tok_vocab_desc vd = tok_vocab_desc_default();
    vd.n_vocab = 15;
    vd.pieces = pieces;
    vd.types = types;
    vd.unk = 0, vd.bos = 1, vd.eos = 2;
    st_err err = {0};
    tok *tk = tok_from_vocab(&vd, &err);
    T_CHECK(tk != NULL, "markdown vocabulary: %s", err.msg);
    if (!tk) return;
    forest *f = forest_init(64, 0);
    int32_t story[] = {1, 4, 5, 6, 7, 8, 9, 10, 6}, cat[] = {11, 13}, dog[] = {12, 3, 14, 13};
    int32_t t2[] = {1, 7};
    forest_id mid, a, b, c;
    forest_add_root(f, story, NULL, 9, 0, &mid, &err);
    forest_append(f, mid, cat, NULL, 2, &a, &err);
    forest_append(f, mid, dog, NULL, 4, &b, &err);
    forest_add_root(f, t2, NULL, 2, 5, &c, &err);
    forest_set_flags(f, a, FOREST_FINISHED, 0);
    forest_set_flags(f, b, FOREST_FINISHED, 0); /* a grow's budget stopped "dog": not finished */
    forest_set_tag(f, b, GROW_END_BUDGET);
    forest_set_flags(f, forest_id_at(f, forest_index(a) - 1), FOREST_BOOKMARK, 0); /* "cat" */
    session_settings s = session_settings_default();
    session_model_id id = {.file = "story.gguf", .size = 1234, .sha256 = "0123456789abcdef0123"};
    char *md = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&md, &len);
    T_CHECK(session_export_markdown(out, f, tk, &s, &id, &err) == ST_OK, "export: %s", err.msg);
    fclose(out);
    static const char *want[] = {
        "# multidecode session\n",
        "Model: `story.gguf` (1234 bytes",
        "17 nodes in 2 trees, 3 branches.",
        "## Tree 1\n\n- Once upon a time, there was a\n"
        "  -  cat **\xe2\x98\x85 bookmark**. \xe2\x80\x94 *branch 1, finished*\n"
        "  -  dog\xe2\x86\xb5\\*. \xe2\x80\x94 *branch 2, stopped by the budget*\n",
        "## Tree 2 (starts at position 5)\n\n- time \xe2\x80\x94 *branch 3*\n",
        "### Branch 1 \xe2\x98\x85 bookmark (finished)\n\nFrom the root of its tree:\n\n"
        "```text\nOnce upon a time, there was a cat.\n```\n",
        "### Branch 2 (stopped by the budget)\n\nContinues branch 1 after \xe2\x80\x9c" "Once upon a time, there was a"
        "\xe2\x80\x9d:\n\n```text\n dog\n*.\n```\n",
        "### Branch 3\n\nFrom the root of its tree:\n\n```text\ntime\n```\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        T_CHECK(md && strstr(md, want[i]), "markdown has:\n%s\n--- got:\n%s", want[i], md ? md : "");
    /* without a tokenizer: token ids */
    free(md);
    out = open_memstream(&md, &len);
    T_CHECK(session_export_markdown(out, f, NULL, NULL, NULL, &err) == ST_OK, "export ids: %s", err.msg);
    fclose(out);
    T_CHECK(md && strstr(md, "- \\[1\\] \\[4\\] \\[5\\]"), "ids without a tokenizer:\n%s", md ? md : "");
    free(md);
    /* a file saved with a tokenizer holds the branch texts: without one, the export is made
     * of them, the same as with it (`session export` without -m printed token ids) but for
     * a bookmark inside a run, marked at the run's end */
    char path[] = "/tmp/md-test-session-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    session_settings s3;
    forest *g = fd >= 0 && session_save(path, f, &s, NULL, tk, &err) == ST_OK ? session_load(path, NULL, &s3, NULL, &err) : NULL;
    T_CHECK(g && s3.n_branch_text == 3, "saved and loaded: %s", err.msg);
    char *md2 = NULL;
    size_t len2 = 0;
    md = NULL;
    if (g) {
        out = open_memstream(&md, &len);
        session_export_markdown(out, g, tk, &s3, &id, &err);
        fclose(out);
        out = open_memstream(&md2, &len2);
        T_CHECK(session_export_markdown(out, g, NULL, &s3, &id, &err) == ST_OK, "export from texts: %s", err.msg);
        fclose(out);
        const char *b1 = md ? strstr(md, "## Branches") : NULL, *b2 = md2 ? strstr(md2, "## Branches") : NULL;
        T_CHECK(b1 && b2 && !strcmp(b1, b2) &&
                    strstr(md2, "- Once upon a time, there was a\n  -  cat. **\xe2\x98\x85 bookmark** \xe2\x80\x94 *branch 1, finished*\n"
                                "  -  dog\xe2\x86\xb5\\*. \xe2\x80\x94 *branch 2, stopped by the budget*\n"),
                "the saved texts' export:\n%s\n--- with the tokenizer:\n%s", md2 ? md2 : "", md ? md : "");
        session_settings_free(&s3);
        forest_free(g);
    }
    free(md), free(md2);
    unlink(path);
    forest_free(f);
    tok_free(tk);
}


/* Writes generation i of the autosaves in dir: 1000 bytes, the first one the letter c. */
static void put_gen(const char *dir, int32_t i, char c) {
    char path[4200], buf[1000];
    autosave_name(dir, i, path, sizeof path);
    memset(buf, ' ', sizeof buf);
    buf[0] = c;
    FILE *o = fopen(path, "w");
    if (o) fwrite(buf, 1, sizeof buf, o), fclose(o);
}

/* The first letter of generation i, 0 when it is not there. */
static char gen_of(const char *dir, int32_t i) {
    char path[4200];
    autosave_name(dir, i, path, sizeof path);
    FILE *in = fopen(path, "r");
    int c = in ? fgetc(in) : 0;
    if (in) fclose(in);
    return c == EOF ? 0 : (char)c;
}

/* Autosave generations: each start moves them back one; the oldest go only beyond the
 * count and the size, and the note says so (4 were kept, silently: a long session was
 * rotated away after 6 runs). */
static void test_autosave_gens(void) {
    char dir[4200], note[200];
    snprintf(dir, sizeof dir, "%s/autosaves", tmpdir);
    mkdir(dir, 0755);
    st_err err = {0};
    autosave_params p = autosave_default_params();
    T_CHECK(!autosave_rotate(dir, &p, note, sizeof note, &err) && !note[0] && !gen_of(dir, 1), "nothing to move");
    for (int32_t i = 0; i <= 10; i++) put_gen(dir, i, (char)('a' + i)); /* a: this run's ... k: ten runs ago */
    T_CHECK(!autosave_rotate(dir, &p, note, sizeof note, &err) && !note[0] && gen_of(dir, 1) == 'a' &&
                gen_of(dir, 11) == 'k' && !gen_of(dir, 0),
            "11 generations of 1000 bytes stay under the defaults: %c .. %c, '%s'", gen_of(dir, 1), gen_of(dir, 11), note);
    p = (autosave_params){.max_gens = 100, .min_gens = 3, .max_bytes = 5000};
    put_gen(dir, 0, 'z');
    T_CHECK(!autosave_rotate(dir, &p, note, sizeof note, &err) && gen_of(dir, 1) == 'z' && gen_of(dir, 5) == 'd' &&
                !gen_of(dir, 6) && strstr(note, "dropped the 7 oldest autosaves"),
            "5000 bytes: generations 1..5 kept (%c .. %c, %c), '%s'", gen_of(dir, 1), gen_of(dir, 5), gen_of(dir, 6) ? gen_of(dir, 6) : '-',
            note);
    p = (autosave_params){.max_gens = 2, .min_gens = 1, .max_bytes = (int64_t)1 << 40};
    put_gen(dir, 0, 'y');
    T_CHECK(!autosave_rotate(dir, &p, note, sizeof note, &err) && gen_of(dir, 2) == 'z' && !gen_of(dir, 3) &&
                strstr(note, "dropped the 4 oldest"),
            "at most 2: '%s'", note);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/md_test_session_export_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_autosave_gens();
    test_markdown();
    rmdir(tmpdir);
    return t_done();
}
