from benchmarks.world_model.cli import main

main()
