/*
 * lineage_test.c - the emulated device's contexts across processes, what a
 * successor daemon's adoption rests on (docs/adoption.md): a context lives
 * while any process holds its command file, whoever opened it and whether or
 * not anyone has the device open; an importer names its PD and MRs by
 * handle; and the device counts the registrations that bound pages, which
 * imports never do.
 *
 *   lineage_test --list      the case names
 *   lineage_test NAME        runs one case; exit 0 when it passes
 */
#include "harness.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The opener's side of a case: a socket pair between the two, and the fork (0 in the child, its pid here). */
static pid_t fork_opener(int sv[2])
{
	pid_t pid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	pid = fork();
	CHECK(pid >= 0, "fork");
	return pid;
}

static void send_fd(int sock, int fd, uint32_t value)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &value, .iov_len = sizeof(value) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	CHECK(sendmsg(sock, &msg, 0) == sizeof(value), "sendmsg: %s", strerror(errno));
}

static int recv_fd(int sock, uint32_t *value)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = value, .iov_len = sizeof(*value) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *c;
	int fd;

	CHECK(recvmsg(sock, &msg, 0) == sizeof(*value), "recvmsg: %s", strerror(errno));
	c = CMSG_FIRSTHDR(&msg);
	CHECK(c && c->cmsg_type == SCM_RIGHTS, "no fd received");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* The path of ctx's holder file (its cmd_fd), which goes when the context is reaped. */
static void holder_of(struct ibv_context *ctx, char *path, size_t size)
{
	char fd[64];
	ssize_t n;

	snprintf(fd, sizeof(fd), "/proc/self/fd/%d", ctx->cmd_fd);
	n = readlink(fd, path, size - 1);
	CHECK(n > 0, "readlink %s", fd);
	path[n] = 0;
}

/*
 * The opener is another process, as the daemon is for a secondary: the fd
 * comes by SCM_RIGHTS. When the opener dies (kill -9) the context lives on,
 * as a ucontext lives while any process holds its fd: this process's
 * objects keep working, and its own engine candidate takes over the device.
 * Once this process closes its descriptor too, nobody holds the context and
 * the next open on the host reaps it (its holder file goes).
 */
static void an_importer_outlives_its_opener(void)
{
	char *mem = shared_memory(4096);
	int sv[2];
	uint32_t pd_handle;
	pid_t pid;
	struct ibv_context *ctx, *other;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *mr;
	struct ibv_sge s;
	char holder[512];

	pid = fork_opener(sv);
	if (pid == 0) {
		struct ibv_context *opened = open_device();
		struct ibv_pd *opd = alloc_pd(opened);

		send_fd(sv[1], opened->cmd_fd, opd->handle);
		for (;;)
			pause();
	}
	ctx = ibv_import_device(recv_fd(sv[0], &pd_handle));
	CHECK(ctx, "import: %s", strerror(errno));
	holder_of(ctx, holder, sizeof(holder));
	pd = ibv_import_pd(ctx, pd_handle);
	CHECK(pd, "import_pd: %s", strerror(errno));
	cq = create_cq(ctx, 16);
	qa = create_qp(pd, cq);
	qb = create_qp(pd, cq);
	connect_qp(qa, qb->qp_num);
	connect_qp(qb, qa->qp_num);
	mr = reg(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	memcpy(mem, "before the opener died", 22);
	s = sge_of(mem, 22, mr);
	post_send_ok(qa, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)(mem + 100), mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
	CHECK(memcmp(mem + 100, "before the opener died", 22) == 0, "written");

	CHECK(kill(pid, SIGKILL) == 0, "kill");
	CHECK(waitpid(pid, NULL, 0) == pid, "waitpid");
	check_live(ctx, 1, 1, 1, 2);
	post_send_ok(qa, 2, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)(mem + 200), mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
	CHECK(memcmp(mem + 200, "before the opener died", 22) == 0, "written after the opener died");
	CHECK(ibv_alloc_pd(ctx), "alloc after the opener died: %s", strerror(errno));
	CHECK(access(holder, F_OK) == 0, "the holder file %s while held", holder);
	/* Another context keeps the device in use, so what the close leaves is reaped, not wiped. */
	other = open_device();
	CHECK(access(holder, F_OK) == 0, "the holder file %s still held by this process", holder);
	CHECK_EQ(ibv_close_device(ctx), 0, "close the last holder");
	CHECK(access(holder, F_OK) != 0, "the unheld context %s was reaped", holder);
	check_live(other, 0, 0, 0, 0);
	ibv_close_device(other);
}

/*
 * mrdemu_registrations counts what bound pages, as a test of adoption reads
 * it: the opener (a predecessor daemon) registers memory and a DM MR and
 * re-registers, and what it fails to register is not counted; the importer
 * (its successor) takes the context by SCM_RIGHTS and names the PD and the MR
 * by handle, which binds nothing and counts nothing, in the context or the
 * device. What the importer registers itself is the context's too, a
 * deregistration takes none back, and the device keeps the context's count
 * once it is reaped.
 */
static void registrations_are_counted_and_imports_are_not(void)
{
	struct ibv_context *mine = open_device(), *ctx;
	char *mem = shared_memory(2 * 4096);
	uint64_t device = mrdemu_registrations(NULL);
	uint32_t pd_handle, mr_handle, lkey;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char holder[512];
	int sv[2];
	pid_t pid;

	pid = fork_opener(sv);
	if (pid == 0) {
		struct ibv_context *opened = open_device();
		struct ibv_pd *opd = alloc_pd(opened);
		struct ibv_alloc_dm_attr attr = { .length = 64 };
		struct ibv_dm *dm = ibv_alloc_dm(opened, &attr);
		char *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct ibv_mr *omr;
		char byte;

		close(sv[0]);
		munmap(hole, 4096);
		CHECK_EQ(mrdemu_registrations(opened), 0, "a new context starts from 0");
		omr = reg(opd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
		CHECK_EQ(mrdemu_registrations(opened), 1, "a registration counted in its context");
		CHECK(!ibv_reg_mr(opd, mem, 4096, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
		      "remote write without local write is refused");
		CHECK(!ibv_reg_mr(opd, hole, 4096, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT,
		      "unmapped memory is refused: %s", strerror(errno));
		CHECK_EQ(mrdemu_registrations(opened), 1, "a refused registration is not counted");
		CHECK(dm, "ibv_alloc_dm: %s", strerror(errno));
		CHECK(ibv_reg_dm_mr(opd, dm, 0, 64, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE),
		      "ibv_reg_dm_mr: %s", strerror(errno));
		CHECK_EQ(mrdemu_registrations(opened), 2, "a DM MR binds the device's pages");
		CHECK_EQ(ibv_rereg_mr(omr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, mem + 4096, 4096, 0), 0, "rereg");
		CHECK_EQ(mrdemu_registrations(opened), 3, "a rereg binds pages again");
		send_fd(sv[1], opened->cmd_fd, opd->handle);
		write_u32(sv[1], omr->handle);
		write_u32(sv[1], omr->lkey);
		/* Until killed, or until the parent's end closes (a failed check there). */
		while (read(sv[1], &byte, 1) > 0)
			;
		_exit(0);
	}
	close(sv[1]);
	ctx = ibv_import_device(recv_fd(sv[0], &pd_handle));
	CHECK(ctx, "import: %s", strerror(errno));
	mr_handle = read_u32(sv[0]);
	lkey = read_u32(sv[0]);
	holder_of(ctx, holder, sizeof(holder));
	CHECK_EQ(mrdemu_registrations(ctx), 3, "the opener's registrations, read through the import");
	CHECK_EQ(mrdemu_registrations(NULL) - device, 3, "and in the device");
	pd = ibv_import_pd(ctx, pd_handle);
	CHECK(pd, "import_pd: %s", strerror(errno));
	mr = ibv_import_mr(pd, mr_handle);
	CHECK(mr, "import_mr: %s", strerror(errno));
	CHECK_EQ(mr->lkey, lkey, "the imported MR's lkey");
	CHECK_EQ(mrdemu_registrations(ctx), 3, "an import by handle registers nothing");
	CHECK_EQ(mrdemu_registrations(NULL) - device, 3, "nor does it in the device");
	CHECK_EQ(mrdemu_registrations(mine), 0, "another context counts none of them");

	CHECK(kill(pid, SIGKILL) == 0, "kill");
	CHECK(waitpid(pid, NULL, 0) == pid, "waitpid");
	reg(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK_EQ(mrdemu_registrations(ctx), 4, "the importer's own registration is the context's");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg the imported MR");
	CHECK_EQ(mrdemu_registrations(ctx), 4, "a deregistration takes none back");
	/* mine keeps the device in use, so what the close leaves is reaped, not wiped. */
	CHECK_EQ(ibv_close_device(ctx), 0, "close the last holder");
	CHECK(access(holder, F_OK) != 0, "the unheld context %s was reaped", holder);
	CHECK_EQ(mrdemu_registrations(NULL) - device, 4, "the device keeps a reaped context's registrations");
	CHECK_EQ(mrdemu_registrations(mine), 0, "and mine still has none");
	ibv_close_device(mine);
}

/*
 * A process that only keeps a command fd, as mrd's descriptor holder does,
 * keeps the context and its objects while no process has the device open
 * at all: the opener (a daemon) registers and dies, and the device is then
 * mapped by nobody. A later process (the successor) must find the context,
 * its PD and its MR as they were, not a device wiped as unused, as the
 * kernel keeps a ucontext for as long as its file is open.
 */
static void a_held_command_file_keeps_the_context_while_no_process_has_the_device(void)
{
	char *mem = shared_memory(4096);
	uint32_t pd_handle, mr_handle, lkey;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	int sv[2], held, spare;
	pid_t pid;

	pid = fork_opener(sv);
	if (pid == 0) {
		struct ibv_context *opened = open_device();
		struct ibv_pd *opd = alloc_pd(opened);
		struct ibv_mr *omr = reg(opd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

		send_fd(sv[1], opened->cmd_fd, opd->handle);
		send_fd(sv[1], opened->cmd_fd, omr->handle);
		send_fd(sv[1], opened->cmd_fd, omr->lkey);
		_exit(0);
	}
	/* This process has not touched the device: once the opener is gone, nobody maps it. */
	held = recv_fd(sv[0], &pd_handle);
	spare = recv_fd(sv[0], &mr_handle);
	close(spare);
	spare = recv_fd(sv[0], &lkey);
	close(spare);
	CHECK(waitpid(pid, NULL, 0) == pid, "waitpid");

	ctx = ibv_import_device(dup(held));
	CHECK(ctx, "import after the opener died, nobody mapping the device: %s", strerror(errno));
	pd = ibv_import_pd(ctx, pd_handle);
	CHECK(pd, "import_pd: %s", strerror(errno));
	mr = ibv_import_mr(pd, mr_handle);
	CHECK(mr, "import_mr: %s", strerror(errno));
	CHECK_EQ(mr->lkey, lkey, "the MR's lkey");
	CHECK(mr->addr == mem && mr->length == 4096, "the MR's range");
	check_live(ctx, 1, 1, 0, 0);
	ibv_unimport_mr(mr);
	ibv_unimport_pd(pd);
	ibv_close_device(ctx);
	close(held);
}

static const struct test_case cases[] = {
	CASE(an_importer_outlives_its_opener),
	CASE(registrations_are_counted_and_imports_are_not),
	CASE(a_held_command_file_keeps_the_context_while_no_process_has_the_device),
};

int main(int argc, char **argv)
{
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
