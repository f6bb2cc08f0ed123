package io.mrd.bench.report;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * The one format every part of the benchmark writes its numbers in, so that the report can join them:
 * tab-separated lines {@code source  row  round  value  unit  [note]}, where source is {@code java}, {@code c} or
 * {@code multi}, row names a measurement ({@code global.65536}, {@code pingpong.p50}, ...) and round is the
 * round it was measured in (1, 2, ...: a row and its reference measured in the same round ran back to back), or 0
 * for a value that is not a measurement (a flag, a setting). The C programs print the same lines, given the round
 * on their command line. Lines starting with {@code #} and blank lines are ignored.
 */
public final class ResultFile
{
    /** The system property naming the results directory that forked benchmark JVMs append to. */
    public static final String OUT_PROPERTY = "mrd.bench.out";
    /** The system property giving forked benchmark JVMs the round they measure in. */
    public static final String ROUND_PROPERTY = "mrd.bench.round";

    private ResultFile()
    {
    }

    /**
     * One measurement of one round.
     */
    public record Result(String source, String row, int round, double value, String unit, String note)
    {
        public String key()
        {
            return source + ":" + row;
        }

        public String toLine()
        {
            return source + "\t" + row + "\t" + round + "\t" + String.format(Locale.ROOT, "%.4f", value) + "\t" +
                unit + (note.isEmpty() ? "" : "\t" + note);
        }
    }

    public static void append(final Path file, final Result result)
    {
        append(file, List.of(result));
    }

    public static void append(final Path file, final List<Result> results)
    {
        final StringBuilder lines = new StringBuilder();
        results.forEach(result -> lines.append(result.toLine()).append('\n'));
        try
        {
            Files.writeString(file, lines, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot write " + file, ex);
        }
    }

    /**
     * Appends to {@code fileName} in the directory named by {@value #OUT_PROPERTY}, if it is set (forked JMH
     * JVMs get it and {@value #ROUND_PROPERTY} from the runner).
     */
    public static void appendIfConfigured(
        final String fileName, final String source, final String row, final double value, final String unit)
    {
        final String dir = System.getProperty(OUT_PROPERTY);
        if (null != dir)
        {
            append(Path.of(dir).resolve(fileName), new Result(source, row,
                Integer.parseInt(System.getProperty(ROUND_PROPERTY, "0")), value, unit, ""));
        }
    }

    /**
     * @return the results of one line, or null for a comment or a blank line.
     * @throws IllegalArgumentException naming the line when it is malformed.
     */
    public static Result parse(final String line)
    {
        final String trimmed = line.strip();
        if (trimmed.isEmpty() || trimmed.startsWith("#"))
        {
            return null;
        }
        final String[] fields = trimmed.split("\t");
        if (fields.length < 5)
        {
            throw new IllegalArgumentException("result line needs source, row, round, value and unit separated by " +
                "tabs: '" + line + "'");
        }
        final int round;
        try
        {
            round = Integer.parseInt(fields[2].strip());
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("result line has no round (a whole number) in its third field: '" +
                line + "'", ex);
        }
        if (round < 0)
        {
            throw new IllegalArgumentException("result line has a negative round: '" + line + "'");
        }
        final double value;
        try
        {
            value = Double.parseDouble(fields[3].strip());
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("result line has no number in its fourth field: '" + line + "'", ex);
        }
        return new Result(fields[0].strip(), fields[1].strip(), round, value, fields[4].strip(),
            fields.length > 5 ? fields[5].strip() : "");
    }

    /**
     * Reads every {@code *.tsv} of {@code dir}; a later line for the same source, row and round replaces an
     * earlier one.
     */
    public static Results readAll(final Path dir)
    {
        final Results results = new Results();
        final List<Path> files;
        try (Stream<Path> list = Files.list(dir))
        {
            files = list.filter(p -> p.getFileName().toString().endsWith(".tsv")).sorted().toList();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot list " + dir, ex);
        }
        for (final Path file : files)
        {
            try
            {
                for (final String line : Files.readAllLines(file, StandardCharsets.UTF_8))
                {
                    final Result result = parse(line);
                    if (null != result)
                    {
                        results.add(result);
                    }
                }
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException("cannot read " + file, ex);
            }
        }
        return results;
    }
}
