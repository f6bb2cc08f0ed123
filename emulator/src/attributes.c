/*
 * attributes.c - what the device reports: its attributes (ibv_query_device,
 * ibv_query_device_ex), its one port (ibv_query_port), the port's GID and
 * P_Key tables, and its GUID and index before any open.
 *
 * The device is an InfiniBand HCA with one port, so everything here is what
 * an IB port reports: link layer INFINIBAND, a LID, GIDs of type IB whose
 * entry 0 is the link-local GID fe80::/64 + the port GUID (an IB GID is the
 * subnet prefix and the port's EUI-64, the GUID unchanged). RoCE v2 would
 * need an Ethernet link layer, a netdev for the GID's IP address and MAC
 * resolution for every address handle, none of which there is; IB needs
 * nothing the emulator lacks. An address vector with is_global (a GRH) is
 * accepted as on IB, where a GRH is optional within a subnet.
 *
 * The node GUID is a function of the host and the device index, not of the
 * device instance: ibv_get_device_guid answers before any open, and every
 * process on this host reports the same GUID for mrdemuN (EUI-64, locally
 * administered: 02:hh:hh:hh:hh:hh:hh:NN from a hash of /etc/machine-id).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "mrd": an IEEE OUI-sized id that names no NIC vendor, as siw reports "bmt" (0x626d74). */
#define EMU_VENDOR_ID 0x6d7264u
#define EMU_VENDOR_PART_ID 1u
#define EMU_PKEY_DEFAULT 0xffffu
#define EMU_PORT_COUNT 1u

/* ---- the GUID ------------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* This host's identity: /etc/machine-id, else the hostname (a container without one). */
static uint64_t host_hash(void)
{
	char buf[256];
	ssize_t n = -1;
	int fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
	}
	if (n <= 0) {
		if (gethostname(buf, sizeof(buf)) != 0)
			snprintf(buf, sizeof(buf), "mrdemu");
		buf[sizeof(buf) - 1] = '\0';
		n = (ssize_t)strlen(buf);
	}
	return fnv1a(buf, (size_t)n, 0xcbf29ce484222325ULL);
}

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static uint64_t host;

static void hash_host(void)
{
	host = host_hash();
}

uint64_t emu_node_guid(uint32_t device_index)
{
	pthread_once(&host_once, hash_host);
	return 0x02ULL << 56 | (host & 0xffffffffffffULL) << 8 | (device_index & 0xffu);
}

/* mrdemuN's N, from the name ibv_get_device_list gave it; -1 for a device not ours. */
static int index_of(struct ibv_device *device)
{
	unsigned int n;
	char end;

	if (!device || sscanf(device->name, "mrdemu%u%c", &n, &end) != 1 || n > 255)
		return -1;
	return (int)n;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	int index = index_of(device);

	if (index < 0) {
		errno = ENODEV;
		return 0;
	}
	return htobe64(emu_node_guid((uint32_t)index));
}

int ibv_get_device_index(struct ibv_device *device)
{
	/* The kernel's ib_device index; a device that is not in sysfs has none (-1), but ours are numbered. */
	return index_of(device);
}

/* ---- the device ---------------------------------------------------------------------- */

static void fill_device_attr(struct emu_context *c, struct ibv_device_attr *attr)
{
	struct emu_shared *sh = c->sh;

	memset(attr, 0, sizeof(*attr));
	snprintf(attr->fw_ver, sizeof(attr->fw_ver), "%u.0.0", EMU_LAYOUT_VERSION);
	attr->node_guid = htobe64(emu_node_guid(sh->device_index));
	attr->sys_image_guid = attr->node_guid;
	attr->max_mr_size = emu_ctxe(sh, c->ctx)->max_mr_size;
	attr->page_size_cap = EMU_PAGE;
	attr->vendor_id = EMU_VENDOR_ID;
	attr->vendor_part_id = EMU_VENDOR_PART_ID;
	attr->hw_ver = EMU_LAYOUT_VERSION;
	attr->max_qp = EMU_MAX_QP;
	attr->max_qp_wr = EMU_MAX_QP_WR;
	/* No memory windows, no SRQ resize, no N-notify: only what the emulator does. */
	attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
				 IBV_DEVICE_SYS_IMAGE_GUID;
	attr->max_sge = EMU_MAX_SGE;
	attr->max_sge_rd = EMU_MAX_SGE;
	attr->max_cq = EMU_MAX_CQ;
	attr->max_cqe = EMU_MAX_CQE;
	attr->max_mr = EMU_MAX_MR;
	attr->max_pd = EMU_MAX_PD;
	attr->max_qp_rd_atom = EMU_MAX_RD_ATOM;
	attr->max_res_rd_atom = EMU_MAX_RD_ATOM * EMU_MAX_QP;
	attr->max_qp_init_rd_atom = EMU_MAX_RD_ATOM;
	attr->atomic_cap = IBV_ATOMIC_HCA;
	/* Address handles are objects of their own (ah.c), not limited by a table. */
	attr->max_ah = EMU_MAX_QP;
	attr->max_pkeys = 1;
	attr->local_ca_ack_delay = 16;
	attr->phys_port_cnt = EMU_PORT_COUNT;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	if (emu_context_gone(context))
		return EIO;
	fill_device_attr(emu_ctx(context), device_attr);
	return 0;
}

/*
 * Everything past orig_attr is zero but phys_port_cnt_ex, max_dm_size (dm.c)
 * and the flags: no ODP, no timestamps, no TSO/RSS, no tag matching, so that
 * tests needing those skip as they do on a NIC without them. A caller built
 * against an older header passes a shorter struct: write no further.
 */
int emu_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex full;

	if (input && input->comp_mask)
		return EINVAL;
	if (emu_context_gone(context))
		return EIO;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(&full, 0, sizeof(full));
	fill_device_attr(emu_ctx(context), &full.orig_attr);
	full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
	full.phys_port_cnt_ex = EMU_PORT_COUNT;
	full.max_dm_size = EMU_MAX_DM_SIZE;
	memcpy(attr, &full, attr_size < sizeof(full) ? attr_size : sizeof(full));
	if (attr_size > sizeof(full))
		memset((char *)attr + sizeof(full), 0, attr_size - sizeof(full));
	return 0;
}

/* ---- the port ------------------------------------------------------------------------- */

static int fill_port_attr(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr)
{
	struct emu_shared *sh = emu_sh(context);

	if (emu_context_gone(context))
		return EIO;
	if (port_num != 1)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = IBV_MTU_4096;
	attr->gid_tbl_len = EMU_GID_TBL_LEN;
	/* No subnet manager queries it: the port's own GUID stands for the system image. */
	attr->port_cap_flags = IBV_PORT_SYS_IMAGE_GUID_SUP;
	attr->max_msg_sz = EMU_MAX_MSG_SZ;
	attr->pkey_tbl_len = 1;
	/* A LID per device (mrdemuN: N + 1), the same in every process, as one fabric assigns it. */
	attr->lid = emu_port_lid(sh);
	attr->sm_lid = 1;
	attr->lmc = 0;
	attr->max_vl_num = 1;		/* VL0 only */
	attr->sm_sl = 0;
	attr->subnet_timeout = 18;
	attr->active_width = 2;		/* 4x */
	attr->active_speed = 32;	/* EDR: 4x EDR is 100 Gb/s */
	attr->phys_state = 5;		/* LinkUp */
	attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
	return 0;
}

/* What the inline ___ibv_query_port calls for a context with a verbs_context. */
int emu_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr,
		   size_t port_attr_len)
{
	struct ibv_port_attr full;
	int rc = fill_port_attr(context, port_num, &full);

	if (rc)
		return rc;
	memcpy(port_attr, &full, port_attr_len < sizeof(full) ? port_attr_len : sizeof(full));
	return 0;
}

/*
 * The exported symbol takes struct _compat_ibv_port_attr, struct ibv_port_attr
 * without its last field (port_cap_flags2): write no further.
 */
#undef ibv_query_port
int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	return emu_query_port(context, port_num, (struct ibv_port_attr *)port_attr,
			      offsetof(struct ibv_port_attr, port_cap_flags2));
}

/* ---- GIDs ----------------------------------------------------------------------------- */

/* Entry 0 is the link-local GID; the other entries of the table are empty. */
static int gid_entry(struct ibv_context *context, uint32_t port_num, uint32_t index, struct ibv_gid_entry *e)
{
	uint64_t guid;

	if (emu_context_gone(context))
		return EIO;
	if (port_num != 1 || index >= EMU_GID_TBL_LEN)
		return EINVAL;
	if (index != 0)
		return ENODATA;
	memset(e, 0, sizeof(*e));
	guid = htobe64(emu_node_guid(emu_sh(context)->device_index));
	e->gid.global.subnet_prefix = htobe64(0xfe80000000000000ULL);
	e->gid.global.interface_id = guid;
	e->gid_index = index;
	e->port_num = port_num;
	e->gid_type = IBV_GID_TYPE_IB;
	e->ndev_ifindex = 0;
	return 0;
}

int emu_gid_index(struct ibv_context *context, uint8_t port_num, const union ibv_gid *gid)
{
	struct ibv_gid_entry e;

	for (uint32_t i = 0; i < EMU_GID_TBL_LEN; i++)
		if (gid_entry(context, port_num, i, &e) == 0 && memcmp(&e.gid, gid, sizeof(*gid)) == 0)
			return (int)i;
	return -1;
}

/* As libibverbs: an empty entry reads as the zero GID; a bad port or index is -1 with errno. */
int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	struct ibv_gid_entry e;
	int rc = index < 0 ? EINVAL : gid_entry(context, port_num, (uint32_t)index, &e);

	if (rc == ENODATA) {
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (rc) {
		errno = rc;
		return -1;
	}
	*gid = e.gid;
	return 0;
}

/* 0, or an errno value: ENODATA for an empty entry, EINVAL for a bad port, index, flags or size. */
int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	int rc;

	if (flags || entry_size < sizeof(e))
		return EINVAL;
	rc = gid_entry(context, port_num, gid_index, &e);
	if (rc)
		return rc;
	memcpy(entry, &e, sizeof(e));
	return 0;
}

/* The valid entries of every port, or a negative errno: -EINVAL when they do not fit. */
ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	size_t n = 0;

	if (flags || entry_size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	if (emu_context_gone(context))
		return -EIO;
	for (uint32_t port = 1; port <= EMU_PORT_COUNT; port++) {
		for (uint32_t i = 0; i < EMU_GID_TBL_LEN; i++) {
			struct ibv_gid_entry e;

			if (gid_entry(context, port, i, &e) != 0)
				continue;
			if (n == max_entries)
				return -EINVAL;
			memcpy((char *)entries + n * entry_size, &e, sizeof(e));
			n++;
		}
	}
	return (ssize_t)n;
}

/*
 * libibverbs' private ibv_query_gid_type (rdma-core's driver.h): the sysfs
 * type, IBV_GID_TYPE_SYSFS_IB_ROCE_V1 (0) for an IB GID.
 */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, int *type)
{
	struct ibv_gid_entry e;
	int rc = gid_entry(context, port_num, index, &e);

	if (rc) {
		errno = rc;
		return -1;
	}
	*type = 0;
	return 0;
}

/* ---- P_Keys --------------------------------------------------------------------------- */

/* One entry: the default full-membership P_Key 0xffff at index 0. */
int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	if (emu_context_gone(context)) {
		errno = EIO;
		return -1;
	}
	if (port_num != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(EMU_PKEY_DEFAULT);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	__be16 entry;

	if (ibv_query_pkey(context, port_num, 0, &entry) != 0)
		return -1;
	if (pkey != entry) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}
