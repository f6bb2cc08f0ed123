package io.mrd.secondary.verbs;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

/**
 * The capacities of a queue pair ({@code struct ibv_qp_cap}, without inline data): work requests outstanding on
 * each queue (a full queue refuses a post with ENOMEM until completions are polled) and SGEs per request. The
 * device may grant more; {@link QueuePair#caps()} says what it granted.
 */
public record QpCaps(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge)
{
    /**
     * @throws MrdException EINVAL for a capacity below 1, naming it.
     */
    public QpCaps
    {
        positive("maxSendWr", maxSendWr);
        positive("maxRecvWr", maxRecvWr);
        positive("maxSendSge", maxSendSge);
        positive("maxRecvSge", maxRecvSge);
    }

    /**
     * @return {@code depth} work requests of up to {@code sges} SGEs on each queue.
     */
    public static QpCaps of(final int depth, final int sges)
    {
        return new QpCaps(depth, depth, sges, sges);
    }

    private static void positive(final String name, final int value)
    {
        if (value < 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "QpCaps " + name + " " + value + " must be at least 1");
        }
    }
}
