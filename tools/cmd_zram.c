/* zs zram: placeholder until its issue lands. */
#include <stdio.h>
#include "cmds.h"

int cmd_zram(int argc, char **argv)
{
	(void)argc;
	fprintf(stderr, "zs %s: not implemented yet\n", argv[0]);
	return 2;
}
