package io.mrd.primary.server;

import java.util.List;

/**
 * Who may talk to the daemon (DESIGN §7): a peer whose uid is the daemon's, root, or one of whose groups is
 * an {@code --allow-gid}. The kernel vouches for the uid and groups ({@code SO_PEERCRED}, {@code
 * SO_PEERGROUPS}) as they were when the peer connected.
 *
 * @param daemonUid the daemon's uid.
 * @param allowGids the {@code --allow-gid} values.
 */
record PeerPolicy(int daemonUid, List<Integer> allowGids)
{
    PeerPolicy
    {
        allowGids = List.copyOf(allowGids);
    }

    /**
     * @return null when the peer may connect, else why not and what to do, for the peer and the log.
     */
    String refusal(final int pid, final int uid, final int[] gids)
    {
        if (uid == daemonUid || uid == 0)
        {
            return null;
        }
        for (final int gid : gids)
        {
            if (allowGids.contains(gid))
            {
                return null;
            }
        }
        return "peer pid " + pid + " uid " + uid + " is refused: the daemon (uid " + daemonUid + ") admits only " +
            (daemonUid == 0 ? "root" : "its own uid and root") +
            (allowGids.isEmpty() ? "" : " and members of the groups " + allowGids) + "; run the client as uid " +
            daemonUid + ", or start the daemon with --allow-gid GID for a group the client runs in";
    }

    /**
     * @return true when the peer may stop the daemon: its own uid or root, never through a group.
     */
    boolean mayStop(final int uid)
    {
        return uid == daemonUid || uid == 0;
    }
}
