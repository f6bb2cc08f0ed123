package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.mr.MrEngine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * What each request does, on a worker thread: the engine calls and the checks around them, turning every
 * outcome into a reply. Failures are {@link MrdException}s that the caller answers with their code and
 * message. Thread-safe (the engine and the window are).
 * <p>
 * Concurrent CREATE_MRs for one range need nothing here: the engine registers under its cache lock and looks
 * the address up again there, so the later request finds the MR the earlier one made.
 */
final class RequestHandler
{
    private final MrEngine engine;
    private final ExternalWindow window;

    RequestHandler(final MrEngine engine, final ExternalWindow window)
    {
        this.engine = engine;
        this.window = window;
    }

    ExternalWindow window()
    {
        return window;
    }

    /**
     * Runs a request other than HELLO, STOP and REG_EXTERNAL (which need the connection).
     */
    Message.Reply execute(final Message.Request request, final int clientId)
    {
        return switch (request)
        {
            case Message.CreateMr m -> createMr(m.address(), m.length(), clientId);
            case Message.Alloc m -> allocate(m.length(), m.flags(), clientId);
            case Message.Free m ->
            {
                engine.freeMemory(m.address(), m.length(), clientId);
                yield new Message.Status(MessageType.FREE, ErrorCode.OK, "");
            }
            case Message.DeregExternal m -> deregisterExternal(m.address(), clientId);
            case Message.Hello m -> throw new IllegalArgumentException("HELLO is answered by the session");
            case Message.Stop m -> throw new IllegalArgumentException("STOP is answered by the session");
            case Message.RegExternal m -> throw new IllegalArgumentException("REG_EXTERNAL needs its fd");
        };
    }

    private Message.Reply createMr(final long address, final long length, final int clientId)
    {
        if (address <= 0 || length < 0 || length > Long.MAX_VALUE - address)
        {
            throw new MrdException(ErrorCode.EINVAL, "CREATE_MR for a buffer at " + Sizes.hex(address) + " of " +
                length + " bytes: the address must be positive, the length not negative, and the end must not wrap");
        }
        MrEntry entry = null;
        if (address >= window.base() && address < window.base() + window.length())
        {
            // External MRs have no chunk to register: the engine only knows them by lookup.
            final MrEntry found = new MrEntry();
            entry = engine.lookup(address, found) ? found : null;
            if (null == entry)
            {
                throw new MrdException(ErrorCode.ENXIO, "address " + Sizes.hex(address) + " is in the external " +
                    "window but no external memory is registered there: register it with REG_EXTERNAL first");
            }
        }
        if (null == entry)
        {
            entry = engine.createMr(address, clientId);
        }
        if (!entry.containsRange(address, length))
        {
            throw new MrdException(ErrorCode.EINVAL, "buffer [" + Sizes.hex(address) + ", " + Sizes.hex(address + length) +
                ") straddles two MRs: the chunk holding its start ends at " + Sizes.hex(entry.end) +
                "; split the buffer at " + Sizes.hex(entry.end));
        }
        return new Message.MrCreated(ErrorCode.OK, "", entry.start, entry.end, entry.lkey);
    }

    private Message.Reply allocate(final long length, final int flags, final int clientId)
    {
        if (flags != 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "ALLOC flags 0x" + Integer.toHexString(flags) +
                " are unknown: protocol version 1 defines none, send 0");
        }
        final Allocation allocation = engine.allocate(length, clientId);
        return new Message.Allocated(ErrorCode.OK, "", allocation.address(), allocation.length());
    }

    /**
     * The checks of REG_EXTERNAL that need no fd, made before the primary asks for one.
     *
     * @return null when the length may be registered, else what is wrong with it.
     */
    String checkExternalLength(final long length)
    {
        if (window.length() == 0)
        {
            return "external memory is disabled (--max-external 0): start the daemon with --max-external SIZE";
        }
        if (length <= 0 || length > window.length())
        {
            return "REG_EXTERNAL of " + length + " bytes: the length must be positive and at most --max-external " +
                Sizes.format(window.length());
        }
        return null;
    }

    /**
     * Maps the client's fd in the external window and registers it. Always closes {@code fd}: the mapping
     * holds the file from then on.
     */
    Message.Reply registerExternal(final long length, final int fd, final int clientId)
    {
        try
        {
            final String bad = checkExternalLength(length);
            if (null != bad)
            {
                throw new MrdException(ErrorCode.EINVAL, bad);
            }
            checkFileSize(fd, length);
            final ExternalWindow.Range range = window.allocate(length, clientId);
            try
            {
                window.map(range, fd);
                final MrEntry entry = engine.registerExternal(range.address(), length, clientId);
                return new Message.ExternalRegistered(ErrorCode.OK, "", range.address(), length, entry.lkey);
            }
            catch (final RuntimeException ex)
            {
                window.unmapAndFree(range);
                throw ex;
            }
        }
        finally
        {
            UnixRights.close(fd);
        }
    }

    /**
     * A file shorter than the range would map pages that raise SIGBUS when touched: refuse it up front.
     */
    private static void checkFileSize(final int fd, final long length)
    {
        final long size;
        try
        {
            size = Files.size(Path.of("/proc/self/fd/" + fd));
        }
        catch (final IOException ex)
        {
            // no procfs: mmap and the registration report what they can
            return;
        }
        if (size < length)
        {
            throw new MrdException(ErrorCode.EINVAL, "the file passed for REG_EXTERNAL has " + size +
                " bytes, fewer than the " + length + " to register: size it (ftruncate) before registering");
        }
    }

    private Message.Reply deregisterExternal(final long address, final int clientId)
    {
        final ExternalWindow.Range range = window.find(address);
        if (null == range)
        {
            throw new MrdException(ErrorCode.ENOENT, "no external memory is registered at " + Sizes.hex(address) +
                ": pass the address REG_EXTERNAL returned");
        }
        engine.deregisterExternal(address, clientId);
        // Unmapped only once deregistered: the registration pins the pages until then.
        window.unmapAndFree(range);
        return new Message.Status(MessageType.DEREG_EXTERNAL, ErrorCode.OK, "");
    }

    /**
     * Frees everything a gone client owned: allocations (as memory free events), external registrations and
     * their mappings.
     *
     * @return what was freed, for the log.
     */
    String reclaim(final int clientId)
    {
        final List<FreedRange> freed = engine.reclaim(clientId);
        final List<ExternalWindow.Range> externals = window.ownedBy(clientId);
        for (final ExternalWindow.Range range : externals)
        {
            window.unmapAndFree(range);
        }
        final long bytes = freed.stream().mapToLong(FreedRange::length).sum();
        final long externalBytes = externals.stream().mapToLong(ExternalWindow.Range::length).sum();
        return freed.isEmpty() && externals.isEmpty() ? "freed nothing" :
            "freed " + Sizes.format(bytes) + " in " + freed.size() + " range" + (freed.size() == 1 ? "" : "s") +
            " and " + externals.size() + " external registration" + (externals.size() == 1 ? "" : "s") +
            " (" + Sizes.format(externalBytes) + ")";
    }
}
