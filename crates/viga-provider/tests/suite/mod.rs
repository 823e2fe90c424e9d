mod scripted;
