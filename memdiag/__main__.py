from memdiag.cli import main

main()
