/**
 * What lets a daemon's registrations outlive it (docs/adoption.md): the descriptor holder, a process of its own
 * that keeps the device's command file and the memory lists' files while no daemon runs
 * ({@link io.mrd.primary.lineage.DescriptorHolder}), the daemon's side of it
 * ({@link io.mrd.primary.lineage.HolderLink}), and the successor's checks of what its predecessor left before it
 * trusts any of it ({@link io.mrd.primary.lineage.Predecessor}).
 */
package io.mrd.primary.lineage;
