package io.mrd.layout.sys;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * How this package binds the C library: one downcall handle per function, each capturing {@code errno} into a
 * per-thread segment that {@link #errno()} reads right after the call. {@link Posix} and {@link UnixSocket} bind
 * through here, so that the errno a caller reads is the one its own last call set, whichever class made it.
 */
final class Libc
{
    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");
    private static final ThreadLocal<MemorySegment> CALL_STATE =
        ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    private Libc()
    {
    }

    /**
     * @return a handle to {@code name} whose first argument is the segment {@link #callState()} gives.
     */
    static MethodHandle bind(final String name, final FunctionDescriptor descriptor, final Linker.Option... more)
    {
        final Linker.Option[] options = new Linker.Option[more.length + 1];
        options[0] = CAPTURE_ERRNO;
        System.arraycopy(more, 0, options, 1, more.length);
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(
            () -> new IllegalStateException("libc has no " + name)), descriptor, options);
    }

    /**
     * @return a handle to a function that cannot fail (no errno captured, no state argument).
     */
    static MethodHandle bindNoErrno(final String name, final FunctionDescriptor descriptor)
    {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(
            () -> new IllegalStateException("libc has no " + name)), descriptor);
    }

    /**
     * @return {@code name}, bound on its first call ({@link Function}), capturing errno as {@link #bind} does.
     */
    static Function function(final String name, final FunctionDescriptor descriptor, final Linker.Option... more)
    {
        return new Function(name, descriptor, true, more);
    }

    /**
     * @return {@code name}, bound on its first call, for a function that cannot fail (as {@link #bindNoErrno}).
     */
    static Function functionNoErrno(final String name, final FunctionDescriptor descriptor)
    {
        return new Function(name, descriptor, false);
    }

    /**
     * A libc function bound on its first call. Building a downcall handle costs the JDK several milliseconds per
     * new signature the first time (it spins classes for it): a worker should pay for the functions it calls
     * (mmap, open, the socket), not for the daemon's (mlock, fallocate, memfd_create, getrlimit, ...). Calls
     * through it go by {@code invokeWithArguments}, so it is for calls that are slow anyway; a function on a
     * measured path stays a {@code static final} handle from {@link #bind}, which the JIT inlines.
     */
    static final class Function
    {
        private final String name;
        private final FunctionDescriptor descriptor;
        private final boolean capturesErrno;
        private final Linker.Option[] options;
        /** Racy on purpose: two threads may both bind it, and either handle is the same function. */
        private volatile MethodHandle handle;

        private Function(
            final String name, final FunctionDescriptor descriptor, final boolean capturesErrno,
            final Linker.Option... options)
        {
            this.name = name;
            this.descriptor = descriptor;
            this.capturesErrno = capturesErrno;
            this.options = options;
        }

        /**
         * @return the call's result; with errno captured, {@link #errno()} reads it afterwards.
         */
        Object call(final Object... args)
        {
            MethodHandle bound = handle;
            if (null == bound)
            {
                bound = capturesErrno ? bind(name, descriptor, options) : bindNoErrno(name, descriptor);
                handle = bound;
            }
            try
            {
                if (!capturesErrno)
                {
                    return bound.invokeWithArguments(args);
                }
                final Object[] withState = new Object[args.length + 1];
                withState[0] = callState();
                System.arraycopy(args, 0, withState, 1, args.length);
                return bound.invokeWithArguments(withState);
            }
            catch (final Throwable t)
            {
                throw rethrow(t);
            }
        }
    }

    /** @return this thread's capture segment, the first argument of every handle from {@link #bind}. */
    static MemorySegment callState()
    {
        return CALL_STATE.get();
    }

    /** @return the errno captured by this thread's last call through a handle from {@link #bind}. */
    static int errno()
    {
        return (int)ERRNO.get(CALL_STATE.get(), 0L);
    }

    /**
     * @return {@code t} as an unchecked exception: a downcall declares {@code Throwable} but throws only what
     * the binding itself got wrong.
     */
    static RuntimeException rethrow(final Throwable t)
    {
        if (t instanceof RuntimeException runtime)
        {
            return runtime;
        }
        if (t instanceof Error error)
        {
            throw error;
        }
        return new IllegalStateException("native call binding", t);
    }
}
