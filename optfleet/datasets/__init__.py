"""Public datasets by name: the registry (:mod:`.registry`), where their files are on this machine and what an
instance's ``dataset:NAME[/PART]`` names (:mod:`.store`), and ``optfleet data fetch`` (:mod:`.fetch`, on pooch).

The Azure LLM inference trace 2023 ships in ``azure_llm_2023/`` beside this file, with its source and licence.
"""
