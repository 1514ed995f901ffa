/*
 * Writes the agent-protocol fuzzer's seed corpus into the directory given: what a host sends the agent, built with
 * the agent's own encoder (agent/proto.c): an exec with arguments, environment, a user and a terminal, its stdin
 * and a resize and a kill; a file read; a file write with its data; init, remint and poweroff; window grants. Each
 * seed's first byte is the read size fuzz_agent_proto.c cuts the stream into.
 */
#include <stdio.h>
#include <string.h>

#include "proto.h"

static int write_seed(const char *dir, const char *name, unsigned char step, struct proto_buf *b)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || b->failed) {
		perror(path);
		return 1;
	}
	fputc(step, f);
	fwrite(b->data, 1, b->len, f);
	fclose(f);
	proto_buf_free(b);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	struct proto_buf b = {0};
	size_t at;
	int failed = 0;

	at = proto_frame_begin(&b, PT_EXEC, 0, 1);
	proto_put_str(&b, F_ARGV, "sh");
	proto_put_str(&b, F_ARGV, "-c");
	proto_put_str(&b, F_ARGV, "cat; echo done");
	proto_put_str(&b, F_ENV, "LANG=C.UTF-8");
	proto_put_str(&b, F_CWD, "/tmp");
	proto_put_str(&b, F_USER, "nobody:nogroup");
	proto_put_u64(&b, F_TIMEOUT_MS, 5000);
	proto_put_u64(&b, F_STDIN, 1);
	proto_put_u64(&b, F_TTY, 1);
	proto_put_u64(&b, F_ROWS, 24);
	proto_put_u64(&b, F_COLS, 80);
	proto_frame_end(&b, at);
	proto_put_data_frame(&b, PT_STDIN, 0, 1, "hello\n", 6);
	proto_put_data_frame(&b, PT_STDIN, PROTO_FLAG_EOF, 1, "", 0);
	at = proto_frame_begin(&b, PT_RESIZE, 0, 1);
	proto_put_u64(&b, F_ROWS, 50);
	proto_put_u64(&b, F_COLS, 132);
	proto_frame_end(&b, at);
	at = proto_frame_begin(&b, PT_WINDOW, 0, 1);
	proto_put_u64(&b, F_WINDOW, 65536);
	proto_frame_end(&b, at);
	at = proto_frame_begin(&b, PT_KILL, 0, 1);
	proto_put_u64(&b, F_SIGNAL, 15);
	proto_frame_end(&b, at);
	failed |= write_seed(dir, "exec", 7, &b);

	at = proto_frame_begin(&b, PT_FILE_READ, 0, 2);
	proto_put_str(&b, F_PATH, "/etc/hostname");
	proto_frame_end(&b, at);
	failed |= write_seed(dir, "file-read", 255, &b);

	at = proto_frame_begin(&b, PT_FILE_WRITE, 0, 3);
	proto_put_str(&b, F_PATH, "/root/notes.txt");
	proto_put_u64(&b, F_MODE, 0644);
	proto_put_u64(&b, F_MKDIRS, 1);
	proto_frame_end(&b, at);
	proto_put_data_frame(&b, PT_FILE_DATA, 0, 3, "some text", 9);
	proto_put_data_frame(&b, PT_FILE_DATA, PROTO_FLAG_EOF, 3, "", 0);
	failed |= write_seed(dir, "file-write", 0, &b);

	at = proto_frame_begin(&b, PT_INIT, 0, 4);
	proto_put_str(&b, F_COMMAND, "apt-get update");
	proto_put_str(&b, F_COMMAND, "touch /ready");
	proto_put_u64(&b, F_TIMEOUT_MS, 60000);
	proto_frame_end(&b, at);
	at = proto_frame_begin(&b, PT_REMINT, 0, 5);
	proto_put_str(&b, F_HOSTNAME, "child-1");
	proto_put_str(&b, F_MACHINE_ID, "0123456789abcdef0123456789abcdef");
	proto_put_bytes(&b, F_ENTROPY, "0123456789abcdef0123456789abcdef", 32);
	proto_put_u64(&b, F_GENERATION, 2);
	proto_frame_end(&b, at);
	at = proto_frame_begin(&b, PT_POWEROFF, 0, 6);
	proto_put_u64(&b, F_REBOOT, 0);
	proto_frame_end(&b, at);
	failed |= write_seed(dir, "init-remint-poweroff", 12, &b);
	return failed;
}
