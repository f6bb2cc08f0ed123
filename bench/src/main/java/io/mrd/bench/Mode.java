package io.mrd.bench;

/**
 * How long the benchmark runs: {@code --smoke} (two tiny rounds that only check the pipeline end to end; its
 * figures mean nothing), {@code --quick} or full. Each part picks its sizes from the mode ({@link Plan#pick}).
 */
public enum Mode
{
    SMOKE(2),
    QUICK(5),
    FULL(9);

    private final int defaultRounds;

    Mode(final int defaultRounds)
    {
        this.defaultRounds = defaultRounds;
    }

    /**
     * @return the rounds every part runs unless told otherwise ({@code --rounds}).
     */
    public int defaultRounds()
    {
        return defaultRounds;
    }
}
