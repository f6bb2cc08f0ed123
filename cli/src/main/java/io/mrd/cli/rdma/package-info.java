/**
 * Two secondaries moving data into each other's memory with mrd's keys over the daemon's device
 * ({@link io.mrd.cli.rdma.RdmaExchange}), every byte checked at its target and stale keys probed on purpose
 * ({@link io.mrd.cli.rdma.StaleKeyProbe}): what {@code mrd worker --rdma-peer} and {@code mrd demo}'s RDMA step
 * run, and the RDMA end-to-end test's peers.
 */
package io.mrd.cli.rdma;
