/*
 * For Flink 1.18 only (see GeneratorFunction.java): a FLIP-27 source of ``count`` records made
 * from their index, each reader limited by a RateLimiterStrategy, as the datagen connector does.
 */
package org.apache.flink.connector.datagen.source;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.api.connector.source.lib.util.IteratorSourceReaderBase;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimitedSourceReader;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.util.NumberSequenceIterator;

import java.util.Collection;

public class DataGeneratorSource<OUT>
        implements Source<OUT, NumberSequenceSplit, Collection<NumberSequenceSplit>>,
                ResultTypeQueryable<OUT> {

    private final GeneratorFunction<Long, OUT> generator;
    private final TypeInformation<OUT> type;
    private final RateLimiterStrategy rate;
    private final NumberSequenceSource numbers;

    public DataGeneratorSource(
            GeneratorFunction<Long, OUT> generator,
            long count,
            RateLimiterStrategy rate,
            TypeInformation<OUT> type) {
        this.generator = generator;
        this.type = type;
        this.rate = rate;
        this.numbers = new NumberSequenceSource(0, count - 1);
    }

    @Override
    public TypeInformation<OUT> getProducedType() {
        return type;
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.BOUNDED;
    }

    @Override
    public SourceReader<OUT, NumberSequenceSplit> createReader(SourceReaderContext context) {
        Generating<OUT> reader = new Generating<>(context, generator);
        return new RateLimitedSourceReader<>(
                reader, rate.createRateLimiter(context.currentParallelism()));
    }

    @Override
    public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> createEnumerator(
            SplitEnumeratorContext<NumberSequenceSplit> context) {
        return numbers.createEnumerator(context);
    }

    @Override
    public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> restoreEnumerator(
            SplitEnumeratorContext<NumberSequenceSplit> context,
            Collection<NumberSequenceSplit> checkpoint) {
        return numbers.restoreEnumerator(context, checkpoint);
    }

    @Override
    public SimpleVersionedSerializer<NumberSequenceSplit> getSplitSerializer() {
        return numbers.getSplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<Collection<NumberSequenceSplit>>
            getEnumeratorCheckpointSerializer() {
        return numbers.getEnumeratorCheckpointSerializer();
    }

    /** Reads its splits' indexes and makes each record from one. */
    static final class Generating<OUT>
            extends IteratorSourceReaderBase<Long, OUT, NumberSequenceIterator, NumberSequenceSplit> {
        private final GeneratorFunction<Long, OUT> generator;

        Generating(SourceReaderContext context, GeneratorFunction<Long, OUT> generator) {
            super(context);
            this.generator = generator;
        }

        @Override
        protected OUT convert(Long index) {
            try {
                return generator.map(index);
            } catch (Exception e) {
                throw new RuntimeException("the generator failed on record " + index, e);
            }
        }
    }
}
