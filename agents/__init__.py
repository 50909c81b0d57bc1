"""Reference and learned scheduling agents for sfenv (SpiderFlow, BACE-Pipe, SpanTrain, ILP, genetic, baselines)."""
