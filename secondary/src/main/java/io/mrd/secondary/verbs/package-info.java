/**
 * The RDMA datapath of a secondary, on the daemon's device and protection domain imported into this process
 * ({@link io.mrd.secondary.verbs.Verbs}, from {@code MrdClient.verbs()}): completion queues, reliable-connected
 * queue pairs, posting SEND, RDMA WRITE and RDMA READ with scatter/gather lists of mrd's lkeys, posting
 * receives, polling completions. FFM only: the hot calls go through the device's function pointers in
 * {@code struct ibv_context.ops} as verbs.h's inline functions do, with native structs made once and refilled,
 * so posting and polling allocate nothing.
 * <p>
 * What does not belong here: registration (the daemon's, through {@code MrCache}), connection management
 * between hosts (a peer is a queue pair of the same device, named by its qp_num), RoCE addressing (GIDs).
 */
package io.mrd.secondary.verbs;
