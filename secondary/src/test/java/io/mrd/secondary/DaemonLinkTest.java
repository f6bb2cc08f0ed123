package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The rule for a request in flight when the daemon died and sent again to its successor
 * ({@link DaemonLink#doneAlready}): which refusals mean the dead daemon had done it.
 */
final class DaemonLinkTest
{
    private static final Message.Free FREE = new Message.Free(0x200000200000L, 2L << 20);

    @Test
    void aFreeOfMemoryNoLongerAllocatedWasDoneByTheDeadDaemon()
    {
        final Message.Reply reply = DaemonLink.doneAlready(FREE, new MrdException(ErrorCode.EINVAL, "not allocated"));
        assertEquals(ErrorCode.OK, ((Message.Status)reply).status());
    }

    @Test
    void aFreeOfMemoryGivenToAnotherClientSinceWasDoneByTheDeadDaemon()
    {
        final Message.Reply reply = DaemonLink.doneAlready(FREE,
            new MrdException(ErrorCode.EPERM, "segment 35 at 0x200004600000 is owned by client 1"));
        assertEquals(ErrorCode.OK, ((Message.Status)reply).status());
    }

    @Test
    void anyOtherRefusalIsTheRefusal()
    {
        final MrdException busy = new MrdException(ErrorCode.EBUSY, "in use");
        assertSame(busy, assertThrows(MrdException.class, () -> DaemonLink.doneAlready(FREE, busy)));
        final MrdException invalid = new MrdException(ErrorCode.EINVAL, "bad length");
        assertSame(invalid, assertThrows(MrdException.class,
            () -> DaemonLink.doneAlready(new Message.Alloc(4096, Access.LOCAL, false), invalid)));
    }
}
