/*
 * unsupported.c - every symbol of the system's libibverbs.so.1 that the
 * emulator does not implement elsewhere, each returning the error
 * libibverbs documents for a device without the feature, so that a program
 * loading libmrdemu.so in place of libibverbs (LD_PRELOAD) never falls
 * through to the real library: its functions expect a context with
 * libibverbs' private data (and crash without it) and write kernel commands
 * into cmd_fd, which here is the device's state.
 *
 * The list is rdma-core 44's `nm -D --defined-only --with-symbol-versions
 * libibverbs.so.1` (emulator/exports, which also generates libibverbs.map and
 * checks that the built library exports every one of them), grouped as nm
 * lists them. The errors follow rdma-core's dummy_ops.c, what libibverbs
 * gives a provider that lacks an op: a creator returns NULL with errno
 * EOPNOTSUPP, an int verb returns EOPNOTSUPP, a destroy or release of an
 * object that cannot exist is a no-op.
 *
 * Every stub is weak: an implementation anywhere else in src/ (a later
 * ibv_rereg_mr, say) replaces it without touching this file.
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WEAK __attribute__((weak))

static void *null_eopnotsupp(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* ---- IBVERBS_1.1 and later: verbs of features the device lacks ------------------------------------ */

/* No multicast (UD only). */
WEAK int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return EOPNOTSUPP;
}

WEAK int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return EOPNOTSUPP;
}

/* No shared receive queues (max_srq 0): none can be created, so none can be modified or destroyed. */
WEAK struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *srq_init_attr)
{
	(void)pd, (void)srq_init_attr;
	return null_eopnotsupp();
}

WEAK int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	(void)srq, (void)srq_attr, (void)srq_attr_mask;
	return EOPNOTSUPP;
}

WEAK int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	(void)srq, (void)srq_attr;
	return EOPNOTSUPP;
}

WEAK int ibv_destroy_srq(struct ibv_srq *srq)
{
	(void)srq;
	return EOPNOTSUPP;
}

/* A CQ's ring is sized at creation. */
WEAK int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq, (void)cqe;
	return EOPNOTSUPP;
}

/* Until the core re-registers MRs in place (issue 19): EOPNOTSUPP, errno too (pyverbs reads either). */
WEAK int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	(void)mr, (void)flags, (void)pd, (void)addr, (void)length, (void)access;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

/* No dma-buf: the engine copies through virtual addresses, and a dma-buf has none here. */
WEAK struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
				      int access)
{
	(void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
	return null_eopnotsupp();
}

/* No enhanced connection establishment options. */
WEAK int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return EOPNOTSUPP;
}

WEAK int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return EOPNOTSUPP;
}

/* RoCE only: an IB port has no Ethernet L2 address to resolve. */
WEAK int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
				     uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	(void)context, (void)attr, (void)eth_mac, (void)vid;
	return EOPNOTSUPP;
}

/*
 * Not guaranteed: the engine's memcpy may store a message's last bytes
 * before its first (glibc's large copies do), so "0, not in order".
 */
WEAK int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp, (void)op, (void)flags;
	return 0;
}

/* ---- IBVERBS_1.0 / 1.1: helpers around the kernel and sysfs ---------------------------------------- */

/* There is no uverbs kernel ABI here: nothing hands the emulator kernel structs to convert. */
WEAK void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, const void *src)
{
	(void)src;
	memset(dst, 0, sizeof(*dst));
}

WEAK void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, const void *src)
{
	(void)src;
	memset(dst, 0, sizeof(*dst));
}

WEAK void ibv_copy_path_rec_from_kern(void *dst, const void *src)
{
	(void)dst, (void)src;
}

WEAK void ibv_copy_path_rec_to_kern(void *dst, const void *src)
{
	(void)dst, (void)src;
}

WEAK const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

/* As libibverbs: the file's bytes into buf, NUL-terminated, without the trailing newline; -1 and errno. */
WEAK int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[4096];
	ssize_t n;
	int fd;

	if (size == 0 || (size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path)) {
		errno = EINVAL;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if ((size_t)n == size)
		n--;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return (int)n;
}

/* The emulated devices have no /sys/class/infiniband entry. */
WEAK int ibv_read_ibdev_sysfs_file(char *buf, size_t size, const char *fmt, ...)
{
	(void)buf, (void)size, (void)fmt;
	errno = ENOENT;
	return -1;
}

/* ---- IBVERBS_PRIVATE_34: the provider interface ---------------------------------------------------- */

/*
 * What libibverbs offers its providers (libmlx5.so and the like). No
 * provider is ever asked for a device here, but pyverbs loads libmlx5 and
 * libefa, whose constructors register their drivers: registration is a
 * no-op, and every command fails as a kernel without the device would.
 */
WEAK bool verbs_allow_disassociate_destroy;

WEAK void verbs_register_driver_34(void *ops)
{
	(void)ops;
}

WEAK void verbs_set_ops(void *vctx, const void *ops)
{
	(void)vctx, (void)ops;
}

WEAK void verbs_init_cq(void *cq, void *context, void *channel, void *cq_context)
{
	(void)cq, (void)context, (void)channel, (void)cq_context;
}

WEAK void verbs_uninit_context(void *context)
{
	(void)context;
}

WEAK void *verbs_open_device(void *device, void *private_data)
{
	(void)device, (void)private_data;
	errno = ENOSYS;
	return NULL;
}

WEAK void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size, void *context_offset,
					 uint32_t driver_id)
{
	(void)device, (void)cmd_fd, (void)alloc_size, (void)context_offset, (void)driver_id;
	errno = ENOSYS;
	return NULL;
}

WEAK void __verbs_log(void *ctx, uint32_t level, const char *fmt, ...)
{
	(void)ctx, (void)level, (void)fmt;
}

WEAK unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link)
{
	(void)link;
	return num_attrs;
}

WEAK int execute_ioctl(void *context, void *cmd)
{
	(void)context, (void)cmd;
	return EOPNOTSUPP;
}

/* ibv_cmd_*: the uverbs commands, one per verb; arguments ignored, as no kernel would take them. */
#define CMD_STUB(name)                      \
	WEAK int ibv_cmd_##name(void)       \
	{                                   \
		return EOPNOTSUPP;          \
	}

CMD_STUB(advise_mr)
CMD_STUB(alloc_dm)
CMD_STUB(alloc_mw)
CMD_STUB(alloc_pd)
CMD_STUB(attach_mcast)
CMD_STUB(close_xrcd)
CMD_STUB(create_ah)
CMD_STUB(create_counters)
CMD_STUB(create_cq)
CMD_STUB(create_cq_ex)
CMD_STUB(create_flow)
CMD_STUB(create_flow_action_esp)
CMD_STUB(create_qp)
CMD_STUB(create_qp_ex)
CMD_STUB(create_qp_ex2)
CMD_STUB(create_rwq_ind_table)
CMD_STUB(create_srq)
CMD_STUB(create_srq_ex)
CMD_STUB(create_wq)
CMD_STUB(dealloc_mw)
CMD_STUB(dealloc_pd)
CMD_STUB(dereg_mr)
CMD_STUB(destroy_ah)
CMD_STUB(destroy_counters)
CMD_STUB(destroy_cq)
CMD_STUB(destroy_flow)
CMD_STUB(destroy_flow_action)
CMD_STUB(destroy_qp)
CMD_STUB(destroy_rwq_ind_table)
CMD_STUB(destroy_srq)
CMD_STUB(destroy_wq)
CMD_STUB(detach_mcast)
CMD_STUB(free_dm)
CMD_STUB(get_context)
CMD_STUB(modify_cq)
CMD_STUB(modify_flow_action_esp)
CMD_STUB(modify_qp)
CMD_STUB(modify_qp_ex)
CMD_STUB(modify_srq)
CMD_STUB(modify_wq)
CMD_STUB(open_qp)
CMD_STUB(open_xrcd)
CMD_STUB(poll_cq)
CMD_STUB(post_recv)
CMD_STUB(post_send)
CMD_STUB(post_srq_recv)
CMD_STUB(query_context)
CMD_STUB(query_device_any)
CMD_STUB(query_mr)
CMD_STUB(query_port)
CMD_STUB(query_qp)
CMD_STUB(query_srq)
CMD_STUB(read_counters)
CMD_STUB(reg_dm_mr)
CMD_STUB(reg_dmabuf_mr)
CMD_STUB(reg_mr)
CMD_STUB(req_notify_cq)
CMD_STUB(rereg_mr)
CMD_STUB(resize_cq)

/* ---- non-default versions ----------------------------------------------------------------------------- */

/*
 * ibv_*@IBVERBS_1.0: the ABI of libibverbs before 1.1 (2006), whose
 * structs (struct ibv_context_1_0 and the like) wrap the current ones. A
 * program that old binds these; the emulator does not emulate that ABI, so
 * each fails as a verb of a missing feature does, and a release is a no-op.
 */
#define COMPAT_1_0(ret, name, body)                                          \
	ret compat_1_0_##name(void);                                         \
	ret compat_1_0_##name(void) body                                     \
	__asm__(".symver compat_1_0_" #name ", " #name "@IBVERBS_1.0");

#define NULL_1_0 { return null_eopnotsupp(); }
#define ERR_1_0 { return EOPNOTSUPP; }
#define VOID_1_0 { }

COMPAT_1_0(void *, ibv_get_device_list, NULL_1_0)
COMPAT_1_0(void, ibv_free_device_list, VOID_1_0)
COMPAT_1_0(void *, ibv_get_device_name, NULL_1_0)
COMPAT_1_0(uint64_t, ibv_get_device_guid, { errno = EOPNOTSUPP; return 0; })
COMPAT_1_0(void *, ibv_open_device, NULL_1_0)
COMPAT_1_0(int, ibv_close_device, ERR_1_0)
COMPAT_1_0(int, ibv_get_async_event, { errno = EOPNOTSUPP; return -1; })
COMPAT_1_0(void, ibv_ack_async_event, VOID_1_0)
COMPAT_1_0(int, ibv_query_device, ERR_1_0)
COMPAT_1_0(int, ibv_query_port, ERR_1_0)
COMPAT_1_0(int, ibv_query_gid, { errno = EOPNOTSUPP; return -1; })
COMPAT_1_0(int, ibv_query_pkey, { errno = EOPNOTSUPP; return -1; })
COMPAT_1_0(void *, ibv_alloc_pd, NULL_1_0)
COMPAT_1_0(int, ibv_dealloc_pd, ERR_1_0)
COMPAT_1_0(void *, ibv_reg_mr, NULL_1_0)
COMPAT_1_0(int, ibv_dereg_mr, ERR_1_0)
COMPAT_1_0(void *, ibv_create_cq, NULL_1_0)
COMPAT_1_0(int, ibv_resize_cq, ERR_1_0)
COMPAT_1_0(int, ibv_destroy_cq, ERR_1_0)
COMPAT_1_0(int, ibv_get_cq_event, { errno = EOPNOTSUPP; return -1; })
COMPAT_1_0(void, ibv_ack_cq_events, VOID_1_0)
COMPAT_1_0(void *, ibv_create_srq, NULL_1_0)
COMPAT_1_0(int, ibv_modify_srq, ERR_1_0)
COMPAT_1_0(int, ibv_query_srq, ERR_1_0)
COMPAT_1_0(int, ibv_destroy_srq, ERR_1_0)
COMPAT_1_0(void *, ibv_create_qp, NULL_1_0)
COMPAT_1_0(int, ibv_query_qp, ERR_1_0)
COMPAT_1_0(int, ibv_modify_qp, ERR_1_0)
COMPAT_1_0(int, ibv_destroy_qp, ERR_1_0)
COMPAT_1_0(void *, ibv_create_ah, NULL_1_0)
COMPAT_1_0(int, ibv_destroy_ah, ERR_1_0)
COMPAT_1_0(int, ibv_attach_mcast, ERR_1_0)
COMPAT_1_0(int, ibv_detach_mcast, ERR_1_0)

/* ibv_register_driver@IBVERBS_1.1: how providers before rdma-core registered; a no-op as above. */
void compat_ibv_register_driver(const char *name, void *init_func);
void compat_ibv_register_driver(const char *name, void *init_func)
{
	(void)name, (void)init_func;
}
__asm__(".symver compat_ibv_register_driver, ibv_register_driver@IBVERBS_1.1");
