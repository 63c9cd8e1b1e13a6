/* fuzz_session.c - fuzz harness for the session loader (engine/session/session.h): the input is a
 * session file's JSON. A file that loads must give a forest whose invariants hold
 * (forest_check), whose per-node metadata can be read, and which exports as Markdown (to
 * /dev/null). Odd and even input sizes alternate between loading with and without a
 * model identity to check against (and force), so both paths run. */
#include "fuzz.h"

#include "session/session.h"

/* JSON a tenth of this size already makes thousands of nodes; bigger inputs only slow
 * the fuzzer down. */
#define FUZZ_MAX_INPUT (1 << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    static FILE *devnull;
    if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
    static const session_model_id mid = {
        .file = "model.gguf", .size = 1234,
        .sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        .n_vocab = 512};
    session_load_params p = session_load_default_params();
    p.model = size & 1 ? &mid : NULL;
    p.force = size & 2;
    p.n_slots = 256; /* the model context's, as the program passes: not the file's */
    session_settings s;
    session_model_id saved;
    st_err err = {0};
    forest *f = session_load_mem((const char *)data, size, &p, &s, &saved, &err);
    if (!f) {
        FUZZ_ASSERT(err.code != ST_OK && err.msg[0] != '\0');
        FUZZ_ASSERT(s.n_kv == 0 && s.kv == NULL && s.meta == NULL);
        return 0;
    }
    FUZZ_ASSERT(forest_check(f, &err) == ST_OK);
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const char *strategy = NULL;
        uint64_t seed;
        if (session_meta_get(s.meta, f, forest_id_at(f, i), &strategy, &seed))
            FUZZ_ASSERT(strategy && strlen(strategy) <= SESSION_MAX_STRATEGY);
    }
    if (s.n_kv > 0) /* not every key: the lookup is linear */
        FUZZ_ASSERT(session_settings_get(&s, s.kv[s.n_kv - 1].key) != NULL);
    FUZZ_ASSERT(session_export_markdown(devnull, f, NULL, &s, &saved, &err) == ST_OK);
    session_settings_free(&s);
    forest_free(f);
    return 0;
}
