package io.mrd.cli;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import picocli.CommandLine;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

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

    @Option(names = "--file", paramLabel = "PATH", converter = PathConverter.class,
        description = "Read this control file instead of DIR/mrd.ctl (a saved copy, say); not with --dir.")
    Path file;

    @CommandLine.Spec(CommandLine.Spec.Target.MIXEE)
    CommandLine.Model.CommandSpec mixee;

    /**
     * @return the control file to read.
     * @throws CommandLine.ParameterException when both --dir and --file name one.
     */
    public Path path()
    {
        if (null != file && null != dirOption.dir)
        {
            throw new CommandLine.ParameterException(mixee.commandLine(), "--dir " + dirOption.dir + " and --file " +
                file + " both name a control file: give one");
        }
        return null != file ? file : dirOption.resolve().resolve(ControlFile.FILE_NAME);
    }

    /**
     * Maps the control file read-only.
     *
     * @throws MrdException ENOENT when there is none (naming the path and what to do), EACCES when this user may
     *                      not read it, EISDIR when --file names a directory, EPROTO when it is not a control file
     *                      of this layout version: whatever {@link ControlFile#openReadOnly} says.
     */
    public ControlFile open()
    {
        final Path path = path();
        try
        {
            return ControlFile.openReadOnly(path);
        }
        catch (final MrdException ex)
        {
            if (null != file && ex.code() == ErrorCode.ENOENT)
            {
                throw new MrdException(ErrorCode.ENOENT, "no file at " + file +
                    ": --file takes the path of a control file (DIR/mrd.ctl) or of a copy of one");
            }
            throw ex;
        }
    }
}
