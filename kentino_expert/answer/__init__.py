"""The answer: its model, the pipeline from facts to answer, questions, why-not, explanations and renderings."""
