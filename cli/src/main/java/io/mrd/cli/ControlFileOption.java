package io.mrd.cli;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * {@code --dir} or {@code --file}: which control file a reading command ({@code dump}, {@code stat},
 * {@code check}, {@code lookup}) opens. These commands never talk to the daemon: they map its control file
 * read-only, as AeronStat maps a CnC file, so they work while the daemon is busy, stuck, or gone.
 */
public final class ControlFileOption
{
    @Mixin
    DirOption dirOption;

    @Option(names = "--file", paramLabel = "PATH",
        description = "Read this control file instead of DIR/mrd.ctl (a saved copy, say).")
    Path file;

    /**
     * @return the control file to read.
     */
    public Path path()
    {
        return null != file ? file : dirOption.resolve().resolve(ControlFile.FILE_NAME);
    }

    /**
     * Maps the control file read-only.
     *
     * @throws MrdException ENOENT when there is none (naming the path and what to do), EPROTO when it is not a
     *                      control file of this layout version.
     */
    public ControlFile open()
    {
        if (null != file && !Files.exists(file))
        {
            throw new MrdException(ErrorCode.ENOENT, "no file at " + file +
                ": --file takes the path of a control file (DIR/mrd.ctl) or of a copy of one");
        }
        return ControlFile.openReadOnly(path());
    }
}
