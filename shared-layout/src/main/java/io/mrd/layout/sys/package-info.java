/**
 * The operating system as mrd uses it, shared by the daemon and the clients: the C library bound once through
 * the Foreign Function &amp; Memory API ({@link io.mrd.layout.sys.Posix} for memory and files,
 * {@link io.mrd.layout.sys.UnixSocket} for Unix sockets and {@code SCM_RIGHTS}), and {@link io.mrd.layout.sys.Sizes}
 * for byte sizes as operators write them.
 * <p>
 * What belongs here: one binding per libc function (a second class binding the same function is a bug:
 * {@link io.mrd.layout.sys.Libc} is how this package binds), the constants and struct layouts of LP64 Linux those
 * calls need, and their errors as {@link io.mrd.layout.MrdException}s naming the call, its arguments and the
 * errno as name and text. What does not: protocol or policy (what a REG_EXTERNAL's descriptor must look like,
 * when a daemon counts as dead), which belongs to the side that decides it; and anything either process
 * could not use.
 * <p>
 * Why a package of {@code shared-layout} and not a module of its own: the two depend on each other. Every
 * failure here is an {@link io.mrd.layout.MrdException} carrying the protocol's {@link io.mrd.layout.ErrorCode}
 * (one exception type, one errno table), and the layout maps its control file through {@code Posix}. A module
 * of its own would need the error codes moved out of the protocol, or a second exception type, to avoid a
 * cycle; and it would buy nothing, since every module that uses this package uses the layout too.
 */
package io.mrd.layout.sys;
