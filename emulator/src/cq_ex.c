/*
 * cq_ex.c - the extended CQ: ibv_create_cq_ex (verbs_context.create_cq_ex)
 * and the ops verbs.h's inline ibv_start_poll, ibv_next_poll, ibv_end_poll
 * and ibv_wc_read_* call through struct ibv_cq_ex.
 *
 * An extended CQ is an ordinary CQ of the core (objects.c) whose struct is
 * an ibv_cq_ex (struct emu_cq's union): start_poll and next_poll take one
 * completion through ops.poll_cq into surface.polled, and the read_* ops
 * read it. A batch from start_poll to end_poll holds the CQ's poll lock, as
 * mlx5's does, unless the CQ was created single-threaded.
 *
 * The fields a completion has here are the standard ones (IBV_WC_STANDARD_
 * FLAGS); a CQ asking for timestamps, VLANs, flow tags or tag matching is
 * EOPNOTSUPP, as on a NIC that has none of them.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

#define EMU_CQ_EX_WC_FLAGS IBV_WC_STANDARD_FLAGS
#define EMU_CQ_EX_MASKS (IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)

static struct emu_cq *ecq_of(struct ibv_cq_ex *cq)
{
	return (struct emu_cq *)cq;
}

/* One completion into polled: 0, ENOENT when the CQ is empty, or the poll's error. */
static int take_one(struct ibv_cq_ex *cq)
{
	struct emu_cq *ecq = ecq_of(cq);
	int n = cq->context->ops.poll_cq(ibv_cq_ex_to_cq(cq), 1, &ecq->surface.polled);

	if (n < 0)
		return -n;
	if (n == 0)
		return ENOENT;
	cq->wr_id = ecq->surface.polled.wr_id;
	cq->status = ecq->surface.polled.status;
	return 0;
}

static int single_threaded(struct ibv_cq_ex *cq)
{
	return ecq_of(cq)->surface.single_threaded;
}

/* On ENOENT (or an error) the batch is over: the caller must not call end_poll. */
static int start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
	int rc;

	if (attr->comp_mask)
		return EINVAL;
	if (!single_threaded(cq))
		pthread_spin_lock(&ecq_of(cq)->surface.poll_lock);
	rc = take_one(cq);
	if (rc && !single_threaded(cq))
		pthread_spin_unlock(&ecq_of(cq)->surface.poll_lock);
	return rc;
}

static int next_poll(struct ibv_cq_ex *cq)
{
	return take_one(cq);
}

static void end_poll(struct ibv_cq_ex *cq)
{
	if (!single_threaded(cq))
		pthread_spin_unlock(&ecq_of(cq)->surface.poll_lock);
}

static const struct ibv_wc *polled(struct ibv_cq_ex *cq)
{
	return &ecq_of(cq)->surface.polled;
}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *cq)
{
	return polled(cq)->opcode;
}

static uint32_t read_vendor_err(struct ibv_cq_ex *cq)
{
	return polled(cq)->vendor_err;
}

static uint32_t read_byte_len(struct ibv_cq_ex *cq)
{
	return polled(cq)->byte_len;
}

static __be32 read_imm_data(struct ibv_cq_ex *cq)
{
	return polled(cq)->imm_data;
}

static uint32_t read_qp_num(struct ibv_cq_ex *cq)
{
	return polled(cq)->qp_num;
}

static uint32_t read_src_qp(struct ibv_cq_ex *cq)
{
	return polled(cq)->src_qp;
}

static unsigned int read_wc_flags(struct ibv_cq_ex *cq)
{
	return polled(cq)->wc_flags;
}

static uint32_t read_slid(struct ibv_cq_ex *cq)
{
	return polled(cq)->slid;
}

static uint8_t read_sl(struct ibv_cq_ex *cq)
{
	return polled(cq)->sl;
}

static uint8_t read_dlid_path_bits(struct ibv_cq_ex *cq)
{
	return polled(cq)->dlid_path_bits;
}

/* Not offered (EOPNOTSUPP at creation): zero, should a program call them anyway. */
static uint64_t read_zero64(struct ibv_cq_ex *cq)
{
	(void)cq;
	return 0;
}

static uint16_t read_cvlan(struct ibv_cq_ex *cq)
{
	(void)cq;
	return 0;
}

static uint32_t read_flow_tag(struct ibv_cq_ex *cq)
{
	(void)cq;
	return 0;
}

static void read_tm_info(struct ibv_cq_ex *cq, struct ibv_wc_tm_info *tm_info)
{
	(void)cq;
	memset(tm_info, 0, sizeof(*tm_info));
}

struct ibv_cq_ex *emu_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	struct ibv_cq *cq;
	struct ibv_cq_ex *ex;
	uint32_t flags = 0;

	if (attr->comp_mask & ~(uint32_t)EMU_CQ_EX_MASKS) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS)
		flags = attr->flags;
	/* No parent domains; an overrun is always reported (the CQ errs), never ignored. */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) || (attr->wc_flags & ~(uint64_t)EMU_CQ_EX_WC_FLAGS) ||
	    (flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cqe > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	cq = ibv_create_cq(context, (int)attr->cqe, attr->cq_context, attr->channel, (int)attr->comp_vector);
	if (!cq)
		return NULL;
	ex = &((struct emu_cq *)cq)->cq_ex;
	ex->comp_mask = 0;
	ecq_of(ex)->surface.single_threaded = (flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED) != 0;
	ex->start_poll = start_poll;
	ex->next_poll = next_poll;
	ex->end_poll = end_poll;
	ex->read_opcode = read_opcode;
	ex->read_vendor_err = read_vendor_err;
	ex->read_byte_len = read_byte_len;
	ex->read_imm_data = read_imm_data;
	ex->read_qp_num = read_qp_num;
	ex->read_src_qp = read_src_qp;
	ex->read_wc_flags = read_wc_flags;
	ex->read_slid = read_slid;
	ex->read_sl = read_sl;
	ex->read_dlid_path_bits = read_dlid_path_bits;
	ex->read_completion_ts = read_zero64;
	ex->read_cvlan = read_cvlan;
	ex->read_flow_tag = read_flow_tag;
	ex->read_tm_info = read_tm_info;
	ex->read_completion_wallclock_ns = read_zero64;
	return ex;
}
