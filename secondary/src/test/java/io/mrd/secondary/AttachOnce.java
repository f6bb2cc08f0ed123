package io.mrd.secondary;

import io.mrd.layout.MrdException;

import java.nio.file.Path;

/**
 * A worker's first steps, for {@link JvmFlagsTest}: attach to the run directory {@code args[0]} through the
 * overload {@code args[1]} names ({@code path} or {@code context}), print the outcome as one line, exit 1 on
 * an {@link MrdException}.
 */
public final class AttachOnce
{
    public static void main(final String[] args)
    {
        final Path dir = Path.of(args[0]);
        try (MrdClient client = "path".equals(args[1]) ?
            MrdClient.attach(dir) : MrdClient.attach(new ClientContext().dir(dir)))
        {
            System.out.println("attached as client " + client.clientId());
        }
        catch (final MrdException ex)
        {
            System.out.println(ex.oneLine());
            System.exit(1);
        }
    }
}
