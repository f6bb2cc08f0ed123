package io.mrd.layout.protocol;

import io.mrd.layout.ErrorCode;

/**
 * The body of a frame, one record per request and reply (DESIGN §7). Requests are rare (the slow path), so
 * records keep the codec simple; the datapath never builds one.
 */
public sealed interface Message
{
    MessageType type();

    /** A request body. */
    sealed interface Request extends Message
    {
    }

    /**
     * {@code HELLO(version, name)}: the first request on a connection.
     *
     * @param resumeClientId 0 for a new client; else the id a dead predecessor gave the client, which resumes with
     *                       it ({@link FrameDescriptor#FLAG_RESUME}).
     */
    record Hello(int version, String name, int resumeClientId) implements Request
    {
        /** A new client's HELLO. */
        public Hello(final int version, final String name)
        {
            this(version, name, 0);
        }

        public MessageType type()
        {
            return MessageType.HELLO;
        }
    }

    /** {@code CREATE_MR(addr, len)}: register the memory around addr (len only checks the buffer's extent). */
    record CreateMr(long address, long length) implements Request
    {
        public MessageType type()
        {
            return MessageType.CREATE_MR;
        }
    }

    /**
     * {@code ALLOC(len, access)}: {@code access} is the {@link io.mrd.layout.Access} the memory gets, chosen by
     * its owner (local write is always added). It takes the place of version 1's {@code flags}, which had to be 0:
     * 0 still means local access only. {@code register} travels as {@link FrameDescriptor#FLAG_REGISTER}: the
     * daemon registers the memory before it answers.
     */
    record Alloc(long length, int access, boolean register) implements Request
    {
        /** An ALLOC that leaves registration to the first lookup. */
        public Alloc(final long length, final int access)
        {
            this(length, access, false);
        }

        public MessageType type()
        {
            return MessageType.ALLOC;
        }
    }

    /** {@code FREE(addr, len)}. */
    record Free(long address, long length) implements Request
    {
        public MessageType type()
        {
            return MessageType.FREE;
        }
    }

    /**
     * {@code REG_EXTERNAL(len, access)}; the fd follows once the primary answers {@link MessageType#SEND_FD}.
     * {@code access} as in {@link Alloc}.
     */
    record RegExternal(long length, int access) implements Request
    {
        public MessageType type()
        {
            return MessageType.REG_EXTERNAL;
        }
    }

    /** {@code DEREG_EXTERNAL(addr)}. */
    record DeregExternal(long address) implements Request
    {
        public MessageType type()
        {
            return MessageType.DEREG_EXTERNAL;
        }
    }

    /** {@code STOP}: graceful shutdown (peers of the daemon's uid only). */
    /**
     * {@code STOP}: stop the daemon.
     *
     * @param handover hand over to a successor instead ({@link FrameDescriptor#FLAG_HANDOVER}).
     */
    record Stop(boolean handover) implements Request
    {
        /** A plain stop. */
        public Stop()
        {
            this(false);
        }

        public MessageType type()
        {
            return MessageType.STOP;
        }
    }

    /**
     * {@code IMPORT_PD(device)}: the protection domain of the daemon's device {@code device} (its place in
     * {@code --device}, 0 first), to import with {@code ibv_import_device} and {@code ibv_import_pd} (an ibverbs
     * provider only).
     */
    record ImportPd(int device) implements Request
    {
        /** Device 0's. */
        public ImportPd()
        {
            this(0);
        }

        public MessageType type()
        {
            return MessageType.IMPORT_PD;
        }
    }

    /**
     * {@code QUEUES(operation, kind, handle, device)}: this client created ({@link #ADD}) or destroyed
     * ({@link #REMOVE}) the completion queue ({@link #CQ}) or queue pair ({@link #QP}) with this
     * {@code ibv_cq.handle} or {@code ibv_qp.handle} in the imported device {@code device}. The daemon destroys
     * what was added and not removed when the client's connection ends.
     */
    record Queues(int operation, int kind, int handle, int device) implements Request
    {
        /** A queue of device 0. */
        public Queues(final int operation, final int kind, final int handle)
        {
            this(operation, kind, handle, 0);
        }

        /** Operation: the queue was created. */
        public static final int ADD = 1;
        /** Operation: the queue was destroyed by its creator. */
        public static final int REMOVE = 2;
        /** Kind: a completion queue; the value {@code mrdemu_destroy_by_handle} takes. */
        public static final int CQ = 1;
        /** Kind: a queue pair; the value {@code mrdemu_destroy_by_handle} takes. */
        public static final int QP = 2;

        public MessageType type()
        {
            return MessageType.QUEUES;
        }
    }

    /** A reply: the status, the message a person can act on, and the fields of a successful reply. */
    sealed interface Reply extends Message
    {
        ErrorCode status();

        String message();
    }

    /** Reply to HELLO. */
    record Welcome(ErrorCode status, String message, int clientId, long epoch, int layoutVersion, String controlFile)
        implements Reply
    {
        public MessageType type()
        {
            return MessageType.HELLO;
        }
    }

    /**
     * Reply to CREATE_MR: the chunk containing the address, its keys and its access; {@code rkey} is
     * {@link io.mrd.layout.Access#NO_RKEY} when the access has no remote flag.
     */
    record MrCreated(ErrorCode status, String message, long start, long end, int lkey, int rkey, int access)
        implements Reply
    {
        public MessageType type()
        {
            return MessageType.CREATE_MR;
        }
    }

    /**
     * Reply to ALLOC: where the memory is and the access it has; when {@code registered} (the request had
     * {@link FrameDescriptor#FLAG_REGISTER}, and so has this reply), the keys of the one MR holding all of it,
     * {@code rkey} {@link io.mrd.layout.Access#NO_RKEY} without remote access; else both keys are 0.
     */
    record Allocated(
        ErrorCode status, String message, long address, long length, int access, boolean registered, int lkey,
        int rkey) implements Reply
    {
        /** A reply to an ALLOC without registration. */
        public Allocated(final ErrorCode status, final String message, final long address, final long length,
            final int access)
        {
            this(status, message, address, length, access, false, 0, 0);
        }

        public MessageType type()
        {
            return MessageType.ALLOC;
        }
    }

    /**
     * Reply to REG_EXTERNAL: the address the memory is mapped at on both sides, its keys and its access, as in
     * {@link MrCreated}.
     */
    record ExternalRegistered(
        ErrorCode status, String message, long address, long length, int lkey, int rkey, int access)
        implements Reply
    {
        public MessageType type()
        {
            return MessageType.REG_EXTERNAL;
        }
    }

    /**
     * Reply to IMPORT_PD: the PD's {@code ibv_pd.handle} and the device's name. Its frame has {@code FLAG_FD}:
     * a descriptor of the device's command file ({@code ibv_context.cmd_fd}) travels by {@code SCM_RIGHTS}
     * with the frame's own bytes.
     */
    record PdImported(ErrorCode status, String message, int pdHandle, String device) implements Reply
    {
        public MessageType type()
        {
            return MessageType.IMPORT_PD;
        }
    }

    /**
     * A reply with nothing but a status: to FREE, DEREG_EXTERNAL, STOP, SEND_FD, QUEUES, and {@link MessageType#ERROR}
     * or any failed request.
     */
    record Status(MessageType type, ErrorCode status, String message) implements Reply
    {
    }
}
