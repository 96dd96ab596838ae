/*
 * The version of the library actually loaded, so a program can compare it
 * with the ZS_VERSION_* of the headers it was compiled against.
 */
#include "zs/common.h"

#define ZS_STR2(x) #x
#define ZS_STR(x) ZS_STR2(x)

unsigned zs_version(void)
{
	return ZS_VERSION_NUMBER;
}

const char *zs_version_string(void)
{
	return ZS_STR(ZS_VERSION_MAJOR) "." ZS_STR(ZS_VERSION_MINOR) "." ZS_STR(ZS_VERSION_PATCH);
}
