/**
 * External memory, passed by a client as an fd (REG_EXTERNAL): the window of address space it is mapped in
 * ({@code ExternalWindow}), the client's file made fit to register: sealed against resizing, checked, backed
 * ({@code ExternalFile}), and its registration and deregistration end to end ({@code ExternalRegistrations}: the
 * checks, the mapping, the MR, the unmapping, a gone client's reclaim).
 * <p>
 * The MR over the memory is made by {@code MrEngine.registerExternal} (the reference's
 * {@code mlx5_create_mr_ext}), because it lives in the one MR table under the engine's locks. What does not
 * belong here: receiving the fd from the socket ({@code server}) and the memory-segment lists ({@code memory}).
 */
package io.mrd.primary.external;
