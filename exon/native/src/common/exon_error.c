/* exon_error.c: the thread-local last-error text behind exon_set_error/exon_last_error. */
#include <stdarg.h>
#include <stdio.h>

#include "common/exon_common.h"

static __thread char exon_error_text[1024];
static __thread int exon_error_code;

int exon_set_error(int code, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(exon_error_text, sizeof(exon_error_text), fmt, args);
    va_end(args);
    exon_error_code = code;
    return code;
}

const char *exon_last_error(void)
{
    return exon_error_text;
}

int exon_last_error_code(void)
{
    return exon_error_code;
}
int64_t exon_nano_clock_ns(void) { return exon_nano_clock(); }
