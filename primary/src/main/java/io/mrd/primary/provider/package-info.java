/**
 * How a range of memory is registered: the {@code Registrar} SPI and its providers, {@code soft} (pins with
 * {@code mlock}, mlx5-like keys, for hosts without an RDMA device) and {@code ibverbs} ({@code ibv_reg_mr}
 * through FFM), chosen by {@code Registrars} from the daemon's {@code ProviderConfig}; and what of the ibverbs
 * provider's device its secondaries import ({@code SharedDevice}: the command fd, the PD handle, the emulated
 * device's destroy by handle).
 * <p>
 * What does not belong here: which range to register and when (the engine, {@code mr}), and any locking: the
 * engine never calls a provider while it holds the seqlock or the memory lock for writing, so a provider may be
 * slow.
 */
package io.mrd.primary.provider;
