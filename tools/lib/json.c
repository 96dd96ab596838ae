/*
 * The JSON writer shared by tools/ and bench/ (json.h): commas, nesting and
 * escaping in one place.
 */
#include "json.h"

#include <inttypes.h>
#include <math.h>

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void json_init(struct json *j, FILE *f, int pretty)
{
	j->f = f;
	j->depth = 0;
	j->pretty = pretty;
	j->after_key = 0;
	j->items[0] = 0;
}

/* Before any item or key: the comma and line break its level wants. */
static void item(struct json *j)
{
	if (j->after_key) {
		j->after_key = 0;
		return;
	}
	int d = j->depth < JSON_MAX_DEPTH ? j->depth : JSON_MAX_DEPTH - 1;
	if (j->depth > 0 && j->items[d])
		fputc(',', j->f);
	if (j->depth > 0 && j->depth <= j->pretty) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputc(' ', j->f);
	} else if (j->depth > 0 && j->items[d]) {
		fputc(' ', j->f);
	}
	j->items[d] = 1;
}

static void open_level(struct json *j, char c)
{
	item(j);
	fputc(c, j->f);
	j->depth++;
	if (j->depth < JSON_MAX_DEPTH)
		j->items[j->depth] = 0;
}

static void close_level(struct json *j, char c)
{
	if (j->depth <= 0)
		return;
	int had = j->depth < JSON_MAX_DEPTH && j->items[j->depth];
	j->depth--;
	if (had && j->depth < j->pretty) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputc(' ', j->f);
	}
	fputc(c, j->f);
}

void json_obj(struct json *j) { open_level(j, '{'); }
void json_obj_end(struct json *j) { close_level(j, '}'); }
void json_arr(struct json *j) { open_level(j, '['); }
void json_arr_end(struct json *j) { close_level(j, ']'); }

void json_key(struct json *j, const char *key)
{
	item(j);
	json_string(j->f, key);
	fputs(": ", j->f);
	j->after_key = 1;
}

void json_str(struct json *j, const char *s)
{
	item(j);
	if (s)
		json_string(j->f, s);
	else
		fputs("null", j->f);
}

void json_num(struct json *j, double v)
{
	item(j);
	if (!isfinite(v))
		fputs("null", j->f);
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		fprintf(j->f, "%.0f", v);
	else
		fprintf(j->f, "%.6g", v);
}

void json_fixed(struct json *j, double v, int decimals)
{
	item(j);
	if (!isfinite(v))
		fputs("null", j->f);
	else
		fprintf(j->f, "%.*f", decimals, v);
}

void json_int(struct json *j, int64_t v)
{
	item(j);
	fprintf(j->f, "%" PRId64, v);
}

void json_uint(struct json *j, uint64_t v)
{
	item(j);
	fprintf(j->f, "%" PRIu64, v);
}

void json_bool(struct json *j, int v)
{
	item(j);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j)
{
	item(j);
	fputs("null", j->f);
}

void json_kobj(struct json *j, const char *key) { json_key(j, key); json_obj(j); }
void json_karr(struct json *j, const char *key) { json_key(j, key); json_arr(j); }
void json_kstr(struct json *j, const char *key, const char *s) { json_key(j, key); json_str(j, s); }
void json_knum(struct json *j, const char *key, double v) { json_key(j, key); json_num(j, v); }
void json_kfixed(struct json *j, const char *key, double v, int decimals)
{
	json_key(j, key);
	json_fixed(j, v, decimals);
}
void json_kint(struct json *j, const char *key, int64_t v) { json_key(j, key); json_int(j, v); }
void json_kuint(struct json *j, const char *key, uint64_t v) { json_key(j, key); json_uint(j, v); }
void json_kbool(struct json *j, const char *key, int v) { json_key(j, key); json_bool(j, v); }

void json_done(struct json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
}
