from membot.cli import main

main()
