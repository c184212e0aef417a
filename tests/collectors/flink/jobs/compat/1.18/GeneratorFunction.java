/*
 * For Flink 1.18 only: its distribution ships no flink-connector-datagen (1.19 and later bundle
 * it), so the test jobs bring the part of it they use. Written for bpmon from the connector's
 * documented API: same package, names and behaviour, compiled only for a 1.18 cluster.
 */
package org.apache.flink.connector.datagen.source;

import org.apache.flink.api.common.functions.Function;

/** Makes the index-th record. */
@FunctionalInterface
public interface GeneratorFunction<T, O> extends Function {
    O map(T value) throws Exception;
}
