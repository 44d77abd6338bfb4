/* A stand-in for libnccl.so.2 that records how it was called, so the
   CPU tests can check the binding's calling convention (the 128-byte
   ncclUniqueId passed by value above all) without NCCL or a GPU. Built
   by fake_test.go with the system C compiler. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fake_state {
	int32_t next_result; /* returned by the next call, then reset to 0 */
	int32_t calls;
	char op[32];
	uint64_t args[8];
	unsigned char id[128];
	int32_t destroy_usleep; /* how long ncclCommDestroy takes */
	int32_t freed_twice;    /* comms destroyed or aborted more than once */
	int32_t attr_result;    /* returned by the next ncclCommUserRank, then reset to 0 */
	int32_t used_freed;     /* calls handed a comm already destroyed or aborted */
};
struct fake_state fake;
struct fake_state *fake_get(void) { return &fake; }

typedef struct { char internal[128]; } ncclUniqueId;
struct comm { int nranks, rank, dev, freed; };

static int ret(const char *op) {
	int r = fake.next_result;
	fake.next_result = 0;
	fake.calls++;
	strncpy(fake.op, op, sizeof fake.op - 1);
	return r;
}

int ncclGetVersion(int *v) { *v = 22304; return ret("ncclGetVersion"); }
int ncclGetUniqueId(ncclUniqueId *id) {
	for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 7 + 1);
	return ret("ncclGetUniqueId");
}
int ncclCommInitRank(struct comm **c, int nranks, ncclUniqueId id, int rank) {
	memcpy(fake.id, id.internal, 128);
	fake.args[0] = (uint64_t)nranks;
	fake.args[1] = (uint64_t)rank;
	int r = ret("ncclCommInitRank");
	if (r) return r;
	*c = calloc(1, sizeof **c);
	(*c)->nranks = nranks; (*c)->rank = rank; (*c)->dev = rank;
	return 0;
}
int ncclCommInitAll(struct comm **c, int n, const int *devs) {
	int r = ret("ncclCommInitAll");
	if (r) return r;
	for (int i = 0; i < n; i++) {
		c[i] = calloc(1, sizeof *c[i]);
		c[i]->nranks = n; c[i]->rank = i; c[i]->dev = devs[i];
	}
	return 0;
}
/* A comm is marked freed, not freed, so that a second free is counted,
   not a crash. */
static int release(struct comm *c, int r) {
	if (r) return r;
	if (__atomic_fetch_add(&c->freed, 1, __ATOMIC_SEQ_CST)) __atomic_fetch_add(&fake.freed_twice, 1, __ATOMIC_SEQ_CST);
	return 0;
}
/* A call given a freed comm: a use after free in NCCL, counted. */
static void use(struct comm *c) {
	if (__atomic_load_n(&c->freed, __ATOMIC_SEQ_CST)) __atomic_fetch_add(&fake.used_freed, 1, __ATOMIC_SEQ_CST);
}
int ncclCommDestroy(struct comm *c) {
	int r = ret("ncclCommDestroy");
	if (fake.destroy_usleep) usleep(fake.destroy_usleep);
	return release(c, r);
}
int ncclCommAbort(struct comm *c) { return release(c, ret("ncclCommAbort")); }
int ncclCommCount(struct comm *c, int *n) { *n = c->nranks; return 0; }
int ncclCommCuDevice(struct comm *c, int *d) { *d = c->dev; return 0; }
int ncclCommUserRank(struct comm *c, int *r) {
	int e = fake.attr_result;
	fake.attr_result = 0;
	*r = c->rank;
	return e;
}
int ncclCommGetAsyncError(struct comm *c, int *e) { use(c); *e = fake.next_result; fake.next_result = 0; return 0; }

static int record(const char *op, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
		uint64_t a4, uint64_t a5, uint64_t a6) {
	uint64_t a[7] = {a0, a1, a2, a3, a4, a5, a6};
	memcpy(fake.args, a, sizeof a);
	return ret(op);
}
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, struct comm *c, void *st) {
	use(c);
	return record("ncclAllReduce", (uintptr_t)s, (uintptr_t)r, n, (uint64_t)dt, (uint64_t)op, (uintptr_t)c, (uintptr_t)st);
}
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, struct comm *c, void *st) {
	use(c);
	return record("ncclReduceScatter", (uintptr_t)s, (uintptr_t)r, n, (uint64_t)dt, (uint64_t)op, (uintptr_t)c, (uintptr_t)st);
}
int ncclAllGather(const void *s, void *r, size_t n, int dt, struct comm *c, void *st) {
	use(c);
	return record("ncclAllGather", (uintptr_t)s, (uintptr_t)r, n, (uint64_t)dt, (uintptr_t)c, (uintptr_t)st, 0);
}
int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, struct comm *c, void *st) {
	use(c);
	return record("ncclBroadcast", (uintptr_t)s, (uintptr_t)r, n, (uint64_t)dt, (uint64_t)root, (uintptr_t)c, (uintptr_t)st);
}
int ncclGroupStart(void) { return ret("ncclGroupStart"); }
int ncclGroupEnd(void) { return ret("ncclGroupEnd"); }
const char *ncclGetErrorString(int r) { return r == 4 ? "invalid argument (run with NCCL_DEBUG=WARN for details)" : "unknown"; }
const char *ncclGetLastError(struct comm *c) { return "fake: the last error"; }
