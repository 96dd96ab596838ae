/*
 * The CLI's and the benchmarks' shared pieces (tools/lib/json.c, tools/lib/parse.c):
 * the JSON writer must place every comma and escape every string, so any
 * output is valid JSON whatever the data (a quote in a path once broke
 * `zs compare --json`); the value parsers must refuse what atoi/strtoul
 * silently took ("8x", " 5", "-1", "nan") and accept every spelling the
 * commands document.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "parse.h"
#include "testutil.h"

/* Run fn on a writer over a memory stream; the text it wrote (caller frees). */
static char *written(void (*fn)(struct json *), int pretty)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	struct json j;
	json_init(&j, f, pretty);
	fn(&j);
	fclose(f);
	return buf;
}

static void doc_nested(struct json *j)
{
	json_obj(j);
	json_kstr(j, "path", "he\"ap\\bin\n\x01");
	json_knum(j, "nan", NAN);
	json_knum(j, "inf", INFINITY);
	json_knum(j, "big", 9007199254740991.0);
	json_knum(j, "frac", 0.125);
	json_kfixed(j, "fixed", 2.0 / 3.0, 3);
	json_kint(j, "neg", -5);
	json_kuint(j, "u64", UINT64_MAX);
	json_kbool(j, "yes", 1);
	json_kstr(j, "none", NULL);
	json_karr(j, "rows");
	for (int i = 0; i < 3; i++) {
		json_obj(j);
		json_kint(j, "i", i);
		json_karr(j, "empty");
		json_arr_end(j);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_kobj(j, "empty");
	json_obj_end(j);
	json_obj_end(j);
	json_done(j);
}

static void doc_top_array(struct json *j)
{
	json_arr(j);
	json_int(j, 1);
	json_str(j, "two");
	json_null(j);
	json_arr_end(j);
	json_done(j);
}

static void test_json(void)
{
	char *s = written(doc_nested, 0);
	REQUIRE(s);
	CHECK(!strcmp(s, "{\"path\": \"he\\\"ap\\\\bin\\u000a\\u0001\", \"nan\": null, \"inf\": null, "
			 "\"big\": 9007199254740991, \"frac\": 0.125, \"fixed\": 0.667, \"neg\": -5, "
			 "\"u64\": 18446744073709551615, \"yes\": true, \"none\": null, \"rows\": "
			 "[{\"i\": 0, \"empty\": []}, {\"i\": 1, \"empty\": []}, {\"i\": 2, \"empty\": []}], "
			 "\"empty\": {}}\n"));
	if (tu_fail)
		fprintf(stderr, "got: %s", s);
	free(s);

	/* Pretty output: the same document, items of the first level on their own lines. */
	s = written(doc_nested, 1);
	REQUIRE(s);
	CHECK(!strncmp(s, "{\n \"path\": ", 11));
	CHECK(strstr(s, ",\n \"rows\": [{\"i\": 0, \"empty\": []}, {\"i\": 1,") != NULL);
	CHECK(!strcmp(s + strlen(s) - 3, "\n}\n"));
	free(s);

	s = written(doc_top_array, 0);
	REQUIRE(s);
	CHECK(!strcmp(s, "[1, \"two\", null]\n"));
	free(s);
}

static void test_parse(void)
{
	uint64_t v = 7;
	CHECK(parse_u64("8", &v) == 0 && v == 8);
	CHECK(parse_u64("18446744073709551615", &v) == 0 && v == UINT64_MAX);
	const char *bad_u64[] = { "8x", " 5", "-1", "+1", "", "18446744073709551616", "0x10", "1e3" };
	for (size_t i = 0; i < sizeof(bad_u64) / sizeof(bad_u64[0]); i++) {
		v = 7;
		CHECK(parse_u64(bad_u64[i], &v) == -1 && v == 7);
	}
	CHECK(parse_u64(NULL, &v) == -1);

	CHECK(parse_bytes("64K", &v) == 0 && v == 65536);
	CHECK(parse_bytes("16KiB", &v) == 0 && v == 16384);
	CHECK(parse_bytes("2MB", &v) == 0 && v == 2u << 20);
	CHECK(parse_bytes("1G", &v) == 0 && v == 1u << 30);
	CHECK(parse_bytes("4096", &v) == 0 && v == 4096);
	const char *bad_bytes[] = { "4x", "K", "-1K", "1KK", "20000000T", " 1K" };
	for (size_t i = 0; i < sizeof(bad_bytes) / sizeof(bad_bytes[0]); i++)
		CHECK(parse_bytes(bad_bytes[i], &v) == -1);

	double d = 0;
	CHECK(parse_double("0.25", &d) == 0 && d == 0.25);
	CHECK(parse_double("-1.5", &d) == 0 && d == -1.5);
	CHECK(parse_double(".5", &d) == 0 && d == 0.5);
	const char *bad_double[] = { "nan", "inf", "-inf", " 1", "1x", "", "1e999" };
	for (size_t i = 0; i < sizeof(bad_double) / sizeof(bad_double[0]); i++) {
		d = 3;
		CHECK(parse_double(bad_double[i], &d) == -1 && d == 3);
	}

	enum zs_free_mode m;
	CHECK(parse_free_mode("pool", &m) == 0 && m == ZS_FREE_POOL_LOCK);
	CHECK(parse_free_mode("class", &m) == 0 && m == ZS_FREE_CLASS_INDEX);
	CHECK(parse_free_mode("class-unlocked", &m) == 0 && m == ZS_FREE_CLASS_INDEX_UNLOCKED);
	/* one spelling (the library's): bench_release's old column names are not others */
	m = ZS_FREE_CLASS_INDEX;
	CHECK(parse_free_mode("pool-lock", &m) == -1 && m == ZS_FREE_CLASS_INDEX);
	CHECK(parse_free_mode("class-index", &m) == -1);
	CHECK(parse_free_mode("ci-unlocked", &m) == -1);
	CHECK(parse_free_mode("Class", &m) == -1);
	CHECK(parse_free_mode("", &m) == -1);
	CHECK(parse_free_mode(NULL, &m) == -1);

	enum zs_chain_policy cp;
	CHECK(parse_chain_policy("heuristic", &cp) == 0 && cp == ZS_CHAIN_HEURISTIC);
	CHECK(parse_chain_policy("Heuristic", &cp) == -1);

	/* parse_int: an optional '-', digits only, within lo..hi */
	int iv = 7;
	CHECK(parse_int("-5", -10, 10, &iv) == 0 && iv == -5);
	CHECK(parse_int("10", -10, 10, &iv) == 0 && iv == 10);
	iv = 7;
	CHECK(parse_int(" 5", -10, 10, &iv) == -1 && iv == 7);
	CHECK(parse_int("+5", -10, 10, &iv) == -1);
	CHECK(parse_int("11", -10, 10, &iv) == -1);
	CHECK(parse_int("-11", -10, 10, &iv) == -1);
	CHECK(parse_int("-", -10, 10, &iv) == -1);
	CHECK(parse_int("5x", -10, 10, &iv) == -1);
	CHECK(parse_int("99999999999", -10, 10, &iv) == -1);
	CHECK(parse_int(NULL, -10, 10, &iv) == -1 && iv == 7);
}

int main(void)
{
	test_json();
	test_parse();
	return tu_done();
}
