/*
 * ah.c - address handles: ibv_create_ah, ibv_destroy_ah, ibv_init_ah_from_wc,
 * ibv_create_ah_from_wc.
 *
 * The device has RC QPs only, whose address vector is in ibv_modify_qp's
 * attributes; an address handle is for UD, which it lacks. It still makes
 * them, as a NIC does before any UD QP exists, checking what a driver
 * checks: a live PD, port 1, and with is_global a source GID index that
 * names a GID of the port (attributes.c). An AH is process-local (the
 * kernel's is a per-context object too) and holds its attributes.
 */
#include "internal.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct emu_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
};

static int pd_live(struct ibv_pd *pd)
{
	struct emu_pd *epd = (struct emu_pd *)pd;
	struct emu_pd_entry *e;

	if (pd->handle >= EMU_MAX_PD)
		return 0;
	e = emu_pd(emu_sh(pd->context), pd->handle);
	return atomic_load(&e->live) && e->gen == epd->gen;
}

static int attr_ok(struct ibv_context *context, const struct ibv_ah_attr *attr)
{
	union ibv_gid gid;

	if (attr->port_num != 1)
		return 0;
	if (!attr->is_global)
		return 1;
	if (attr->grh.sgid_index >= EMU_GID_TBL_LEN || ibv_query_gid(context, 1, attr->grh.sgid_index, &gid) != 0)
		return 0;
	/* An empty entry reads as the zero GID: not a source address. */
	return gid.global.interface_id != 0;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct emu_ah *ah;

	if (emu_context_gone(pd->context)) {
		errno = EIO;
		return NULL;
	}
	if (!pd_live(pd) || !attr_ok(pd->context, attr)) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->ah.handle = 0;
	ah->attr = *attr;
	return &ah->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}

/*
 * The address vector back to a completion's sender, as libibverbs builds
 * it for IB: its LID and SL, and with a GRH (IBV_WC_GRH) the sender's GID
 * as destination and our GID it was sent to as source.
 */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (wc->wc_flags & IBV_WC_GRH) {
		int index;

		if (!grh) {
			errno = EINVAL;
			return -1;
		}
		index = emu_gid_index(context, port_num, &grh->dgid);
		if (index < 0) {
			errno = ENOENT;
			return -1;
		}
		ah_attr->is_global = 1;
		ah_attr->grh.dgid = grh->sgid;
		ah_attr->grh.sgid_index = (uint8_t)index;
		ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
		ah_attr->grh.hop_limit = 0xff;
		ah_attr->grh.traffic_class = (be32toh(grh->version_tclass_flow) >> 20) & 0xff;
	}
	return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0)
		return NULL;
	return ibv_create_ah(pd, &attr);
}
