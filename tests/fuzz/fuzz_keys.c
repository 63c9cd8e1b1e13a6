/* fuzz_keys.c - fuzz harness for key-binding files (ui/keys.h): the input is a binding
 * file applied over the default map; then every action's key list is written (into a
 * short buffer too, to exercise truncation) and a key name read from the input's first
 * line must survive name -> key -> name. */
#include "fuzz.h"

#include "../../ui/keys.h"

/* ui_key_parse(ui_key_name(k)) == k for every key a name gives. */
static void check_key_name(const uint8_t *data, size_t size) {
    size_t n = 0;
    while (n < size && n < 32 && data[n] != '\n') n++;
    char name[33];
    memcpy(name, data, n);
    name[n] = '\0';
    int k = ui_key_parse(name);
    if (k < 0) return;
    char back[32];
    ui_key_name(k, back, sizeof back);
    FUZZ_ASSERT(ui_key_parse(back) == k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ui_keymap km; /* 8 KiB: kept off the stack, reset for each input */
    ui_keymap_defaults(&km);
    char msg[128];
    int32_t bad = ui_keymap_parse(&km, (const char *)data, size, "fuzz", msg, sizeof msg);
    FUZZ_ASSERT(bad >= 0 && strlen(msg) < sizeof msg && (bad == 0) == (msg[0] == '\0'));
    for (int a = 0; a < UI_ACT_N; a++) {
        char keys[256], short_keys[6];
        ui_keymap_keys_of(&km, a, keys, sizeof keys);
        ui_keymap_keys_of(&km, a, short_keys, sizeof short_keys);
        FUZZ_ASSERT(strlen(keys) < sizeof keys && strlen(short_keys) < sizeof short_keys);
    }
    for (int v = 0; v < UI_VIEW_N; v++)
        for (int32_t i = 0; i < km.n[v]; i++) {
            int a = ui_keymap_lookup(&km, v, km.b[v][i].key);
            FUZZ_ASSERT(a >= 0 && a < UI_ACT_N);
        }
    check_key_name(data, size);
    return 0;
}
